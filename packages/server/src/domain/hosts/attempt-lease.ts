/** How long a lease lives without a heartbeat; hosts renew every few seconds. */
export const LEASE_SECONDS = 15;
