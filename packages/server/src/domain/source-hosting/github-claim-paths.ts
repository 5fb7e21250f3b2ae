/**
 * The provider-authorized claim route (web/pages/github-claim.ts). The setup path is the GitHub
 * App's "Setup URL": the provider redirects there after an install with `installation_id` and
 * `setup_action`. The callback path is the app's OAuth "Callback URL".
 */
export const GITHUB_CLAIM_SETUP_PATH = "/onboarding/github/setup";
export const GITHUB_CLAIM_CALLBACK_PATH = "/onboarding/github/callback";
