/**
 * The exact non-destructive confirmation a recovery invocation requires (rule 3):
 * `recover-boot:<provider_service_name>:preserve-root-and-srv`, the provider service name being
 * the one the host operator's recovery binding recorded in its readiness.
 */
export function recoveryConfirmationOf(providerServiceName: string): string {
  return `recover-boot:${providerServiceName}:preserve-root-and-srv`;
}
