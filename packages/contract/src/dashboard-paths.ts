/**
 * The dashboard's page of a job, as other surfaces link to it: the CLI prints it at submission,
 * at the end and for `kiln jobs open`. The dashboard serves it from the API's own origin
 * (server/src/web/pages/job-pages.ts routes `/jobs/:id`).
 */
export const jobPagePath = (jobId: string): string => `/jobs/${encodeURIComponent(jobId)}`;
