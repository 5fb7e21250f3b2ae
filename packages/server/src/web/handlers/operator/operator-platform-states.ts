import { canarySettings } from "../../../domain/platform/canaries/canary-settings.js";
import { computeOperatingStates } from "../../../domain/platform/operating-states/compute-operating-states.js";
import type { Handler } from "../../http/handler.js";

/**
 * operator.platform.states: management liveness, management readiness, execution capacity and
 * end-to-end workload health, computed from measurements at the request's instant
 * (platform/operating-states/), with each host's capacity observation.
 */
export const platformStates: Handler<"operator.platform.states"> = async (ctx) =>
  computeOperatingStates(
    {
      storage: ctx.deps.storage,
      blobs: ctx.deps.blobs,
      canaries: canarySettings(ctx.deps.canaries),
      version: ctx.deps.version,
    },
    ctx.now,
  );
