import { createHash } from "node:crypto";
import {
  type InputOf,
  SettingWrite,
  TENANT_OPERATOR_CONTROLLED_SETTINGS,
  TENANT_WRITABLE_SETTINGS,
} from "@kiln/contract";
import type { Command } from "commander";
import { CliExit, connect, EXIT, out, printJson, runCommand, table } from "../output.js";

interface SettingsOptions {
  json?: boolean;
}

interface SetOptions extends SettingsOptions {
  version: string;
}

/** The JSON type the contract gives a setting name in SettingWrite.changes ("unknown" for operator-controlled). */
function schemaTypeOf(name: string): string | undefined {
  const changes = SettingWrite.properties.changes as unknown as { properties: Record<string, { type?: string }> };
  const member = changes.properties[name];
  return member === undefined ? undefined : (member.type ?? "unknown");
}

/**
 * The value `kiln settings set` sends, typed by the contract's schema for the name: integers and
 * booleans parsed, allowed_sizes as a comma-separated list (or a JSON array). The service still
 * validates it; this only turns command-line text into the JSON the schema describes.
 */
export function parseSettingValue(name: string, text: string): unknown {
  const type = schemaTypeOf(name);
  if (type === "integer") {
    if (!/^[0-9]+$/.test(text)) throw new CliExit(EXIT.error, `${name} takes a whole number, got ${text}`);
    return Number(text);
  }
  if (type === "boolean") {
    if (text !== "true" && text !== "false") throw new CliExit(EXIT.error, `${name} takes true or false, got ${text}`);
    return text === "true";
  }
  if (type === "array") {
    if (text.startsWith("[")) {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new CliExit(EXIT.error, `${name} takes a comma-separated list or a JSON array, got ${text}`);
      }
    }
    return text.split(",").map((s) => s.trim());
  }
  // Strings, and names the service refuses (operator-controlled or unknown): sent as given, so the
  // service's own refusal (operator_controlled, invalid_request naming the field) is what prints.
  if (type === "unknown" || type === undefined) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

const valueText = (value: unknown) => (Array.isArray(value) ? value.join(",") : String(value));

/** `kiln settings`: tenant.settings.get — the policy at its version, limits beside consumption. */
async function showSettings(options: SettingsOptions): Promise<void> {
  const { client } = connect();
  const settings = await client.call("tenant.settings.get", {});
  if (options.json) {
    printJson(settings);
    return;
  }
  out(
    `settings of ${settings.tenant}, version ${settings.version}` +
      (settings.changed_by === null ? " (never written)" : ` (by ${settings.changed_by} at ${settings.changed_at})`),
  );
  out("");
  out(
    table(
      ["SETTING", "VALUE", "ORIGIN", "STATUS"],
      settings.settings.map((s) => [s.name, valueText(s.value), s.origin ?? "", s.status ?? ""]),
    ),
  );
  out("");
  out(
    table(
      ["LIMIT (operator-controlled)", "LIMIT", "CONSUMPTION"],
      Object.entries(settings.limits).map(([name, l]) => [name, String(l.limit), String(l.consumption)]),
    ),
  );
  out(`consumption measured at ${settings.consumption_measured_at}`);
  if (settings.suspended) out("the operator has suspended this tenant: new submissions are refused");
  out("");
  out(`change one with: kiln settings set <name> <value> --version ${settings.version}`);
}

/**
 * `kiln settings set <name> <value> --version N`: tenant.settings.write at the version read. The
 * idempotency-key is derived from the version and the change, so repeating the same command after
 * a lost answer replays the original receipt instead of writing twice.
 */
async function setSetting(name: string, text: string, options: SetOptions): Promise<void> {
  if (!/^[0-9]+$/.test(options.version)) {
    throw new CliExit(
      EXIT.error,
      `--version must be the settings version read (a whole number), got ${options.version}`,
    );
  }
  const version = Number(options.version);
  const changes = { [name]: parseSettingValue(name, text) };
  const key = `tenant-settings-${version}-${createHash("sha256").update(JSON.stringify(changes)).digest("hex").slice(0, 32)}`;
  const { client } = connect();
  const receipt = await client.call("tenant.settings.write", {
    // The value is typed at run time (parseSettingValue) and checked by the service's schema.
    body: { version, changes } as InputOf<"tenant.settings.write">["body"],
    idempotencyKey: key,
  });
  if (options.json) {
    printJson(receipt);
    return;
  }
  out(
    `${name} set on ${receipt.target}: version ${receipt.version}, by ${receipt.changed_by} at ${receipt.changed_at}`,
  );
  out(`effective: ${receipt.effective}`);
  if (receipt.not_applied.length > 0) {
    out(`recorded but not applied by this runtime: ${receipt.not_applied.join(", ")}`);
  }
}

export function registerSettingsCommand(program: Command): void {
  const settings = program
    .command("settings")
    .description("the tenant's settings at their version, with the operator's limits beside consumption")
    .option("--json", "print the service's TenantSettings document instead of text")
    .action((options: SettingsOptions) => runCommand(options.json === true, () => showSettings(options)));
  settings
    .command("get")
    .description("the tenant's settings (as `kiln settings`)")
    .option("--json", "print the service's TenantSettings document instead of text")
    .action((options: SettingsOptions) => runCommand(options.json === true, () => showSettings(options)));
  settings
    .command("set <name> <value>")
    .description(
      `write one tenant setting at the version read (${TENANT_WRITABLE_SETTINGS.join(", ")}); ` +
        `${TENANT_OPERATOR_CONTROLLED_SETTINGS.join(", ")} change only through the operator`,
    )
    .requiredOption("--version <N>", "the settings version read (kiln settings shows it)")
    .option("--json", "print the service's SettingReceipt instead of text")
    .action((name: string, value: string, options: SetOptions) =>
      runCommand(options.json === true, () => setSetting(name, value, options)),
    );
}
