/**
 * T2 cross-tenant matrix. Two populated tenants, A and B (fixtures.ts), on SQLite and
 * PostgreSQL. A's owner (every scope, a person's CLI token) calls every tenant operation whose
 * path names a record with B's ids — jobs (finished and queued; attempts, artifacts), uploads
 * (verified and reserved; parts), repositories (one only B has), advisories (under B's
 * repository and under A's repository of the same name), agent credentials, CLI tokens — and
 * with a twin of each id that exists nowhere (same length, last characters changed). Also B's
 * ids where they travel in a query or body: a repository filter, a lineage to purge, an upload
 * to submit, an upload id reserved as A's own.
 *
 * Broken promises: an answer to B's id that differs from the twin's by one byte (after the twin
 * is written back as B's id), or that is not a refusal where the twin's is one; and any change
 * to what B sees of its own records (read through B's token before and after).
 */
import { CATALOGUE, type Operation } from "@kiln/contract";
import { onboardRepository } from "@kiln/storage";
import type { InjectOptions } from "fastify";
import { bearer, type TestApp, testApp } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { archiveOf, archiveSubmission } from "../test/source-archives.js";
import type { Answer } from "./answers.js";
import { populateTenants, REPOSITORY, type TenantWorld } from "./fixtures.js";
import { answerOf, minimalRequest, paramNames } from "./requests.js";
import { count, runTrial, trialDialects } from "./trial.js";

/** B's repository that A does not have. */
const B_ONLY_REPOSITORY = "beta-corp/secret-engine";

/** An id of the same length and alphabet that names nothing: its last three characters changed. */
function twinOf(id: string): string {
  const tail = id.endsWith("qzx") ? "xqz" : "qzx";
  return id.length > 3 ? `${id.slice(0, -3)}${tail}` : `${id}${tail}`.slice(-Math.max(id.length, 3));
}

interface Probe {
  readonly op: Operation;
  readonly what: string;
  /** Path parameters naming B's records, and the same with each foreign value replaced by its twin. */
  readonly foreign: Record<string, string>;
  readonly twin: Record<string, string>;
  readonly query?: (values: Record<string, string>) => string;
  readonly body?: (values: Record<string, string>) => unknown;
  /** The idempotency key to send (durable-owner operations name the upload), from the values. */
  readonly key?: (values: Record<string, string>) => string;
}

/** Every record of B a path parameter can name, by operation and parameter. */
function probesOf(op: Operation, b: TenantWorld, bOnly: readonly [string, string]): Probe[] {
  const names = paramNames(op);
  const [owner, name] = REPOSITORY.split("/") as [string, string];
  const probes: Probe[] = [];
  const add = (what: string, foreign: Record<string, string>, fixed: Record<string, string> = {}) => {
    const twin = Object.fromEntries(Object.entries(foreign).map(([k, v]) => [k, twinOf(v)]));
    probes.push({ op, what, foreign: { ...foreign, ...fixed }, twin: { ...twin, ...fixed } });
  };
  const has = (...wanted: string[]) => wanted.every((w) => names.includes(w)) && names.length === wanted.length;
  if (op.id.startsWith("jobs.") && names.includes("id")) {
    const fixed: Record<string, string> = {};
    if (names.includes("attempt")) fixed.attempt = "1";
    if (names.includes("index")) fixed.index = "0";
    for (const job of [...b.finishedJobs, ...b.queuedJobs]) add(`B's job ${job}`, { id: job }, fixed);
  } else if (op.id.startsWith("cli_tokens.") && has("id")) {
    add("B's CLI token", { id: b.spareCliToken.id });
  } else if (op.id.startsWith("sources.") && names.includes("upload")) {
    const fixed: Record<string, string> = names.includes("part") ? { part: "1" } : {};
    for (const upload of b.uploads) add(`B's upload ${upload}`, { upload }, fixed);
  } else if (op.id.startsWith("credentials.") && has("name")) {
    for (const agent of b.agents.keys()) add(`B's credential ${agent}`, { name: agent });
  } else if (op.id.startsWith("repositories.") && names.includes("owner") && names.includes("name")) {
    const [bOwner, bName] = bOnly;
    if (names.includes("advisory")) {
      for (const advisory of b.advisories) {
        add(`B's advisory ${advisory} under A's ${REPOSITORY}`, { advisory }, { owner, name });
        add(`B's advisory under B's ${B_ONLY_REPOSITORY}`, { owner: bOwner, name: bName, advisory });
      }
    } else if (names.length === 2) add(`B's repository ${B_ONLY_REPOSITORY}`, { owner: bOwner, name: bName });
  }
  if (names.length > 0 && probes.length === 0) {
    throw new Error(`T2 has no foreign ids for ${op.id} (${op.path}): teach probesOf this operation`);
  }
  return probes.map((p) => {
    if (op.id === "repositories.admission") {
      return { ...p, query: () => `base_ref=${"0123456789abcdef".repeat(2)}01234567` };
    }
    if (op.id === "jobs.logs_search") return { ...p, query: () => "q=Compiling" };
    if (op.id === "repositories.settings.write") {
      return { ...p, body: () => ({ version: 0, changes: { affected_tests: true } }) };
    }
    if (op.id === "repositories.lineages.purge") {
      const lineage = b.lineages[0] ?? "";
      return {
        ...p,
        foreign: { ...p.foreign, lineage },
        twin: { ...p.twin, lineage: twinOf(lineage) },
        body: (values: Record<string, string>) => ({ lineage: values.lineage, confirm: values.lineage }),
      };
    }
    if (!op.id.startsWith("sources.")) return p;
    return {
      ...p,
      query: () =>
        op.id === "sources.chunk.check"
          ? `repository=${encodeURIComponent(REPOSITORY)}&sha256=${"a".repeat(64)}`
          : `repository=${encodeURIComponent(REPOSITORY)}`,
      ...(op.keyed ? { key: (values: Record<string, string>) => values.upload ?? "k" } : {}),
    };
  });
}

/** Probes where B's ids travel in a query or a body. */
function bodyAndQueryProbes(b: TenantWorld, manifests: ReadonlyMap<string, string>): Probe[] {
  const op = (id: string) => {
    const found = CATALOGUE.find((o) => o.id === id);
    if (found === undefined) throw new Error(`no operation ${id}`);
    return found;
  };
  const repo = { repository: B_ONLY_REPOSITORY };
  const repoTwin = { repository: twinOf(B_ONLY_REPOSITORY) };
  const probes: Probe[] = [
    {
      op: op("jobs.list"),
      what: `jobs of B's ${B_ONLY_REPOSITORY}`,
      foreign: repo,
      twin: repoTwin,
      query: (v) => `repository=${encodeURIComponent(v.repository ?? "")}`,
    },
    {
      op: op("sources.capabilities"),
      what: `capabilities for B's ${B_ONLY_REPOSITORY}`,
      foreign: repo,
      twin: repoTwin,
      query: (v) => `repository=${encodeURIComponent(v.repository ?? "")}`,
    },
    {
      op: op("jobs.submit"),
      what: `a job of B's ${B_ONLY_REPOSITORY}`,
      foreign: repo,
      twin: repoTwin,
      body: (v) => inlineSubmission(v.repository ?? ""),
    },
  ];
  for (const lineage of b.lineages) {
    probes.push({
      op: op("repositories.lineages.purge"),
      what: `B's lineage ${lineage}`,
      foreign: { lineage, owner: "acme", name: "widget" },
      twin: { lineage: twinOf(lineage), owner: "acme", name: "widget" },
      body: (v) => ({ lineage: v.lineage, confirm: v.lineage }),
    });
  }
  for (const upload of b.uploads) {
    const manifest = manifests.get(upload) ?? "0".repeat(64);
    probes.push({
      op: op("jobs.submit"),
      what: `a job from B's upload ${upload}`,
      foreign: { upload },
      twin: { upload: twinOf(upload) },
      body: (v) => archiveSubmission(v.upload ?? "", manifest, {}, REPOSITORY),
    });
  }
  return probes;
}

let keys = 0;

function requestOf(probe: Probe, values: Record<string, string>, token: string): InjectOptions {
  const pathValues = Object.fromEntries(Object.entries(values).filter(([k]) => paramNames(probe.op).includes(k)));
  const base = minimalRequest(probe.op, bearer(token), pathValues);
  const headers = { ...(base.headers as Record<string, string>) };
  if (probe.op.keyed) headers["idempotency-key"] = probe.key?.(values) ?? `t2-${++keys}`;
  let payload = base.payload;
  if (probe.body !== undefined) {
    headers["content-type"] = "application/json";
    payload = JSON.stringify(probe.body(values));
  }
  const query = probe.query?.(values);
  return {
    ...base,
    url: query === undefined ? String(base.url) : `${base.url}?${query}`,
    headers,
    ...(payload === undefined ? {} : { payload }),
  };
}

/** `text` with every twin value written back as the foreign one it stands for (longest first). */
function asForeign(text: string, probe: Probe): string {
  const pairs = Object.keys(probe.foreign)
    .filter((k) => probe.foreign[k] !== probe.twin[k])
    .map((k) => [probe.twin[k] ?? "", probe.foreign[k] ?? ""] as const)
    .sort((x, y) => y[0].length - x[0].length);
  let out = text;
  for (const [twin, foreign] of pairs) {
    out = out.split(twin).join(foreign);
    out = out.split(encodeURIComponent(twin)).join(encodeURIComponent(foreign));
  }
  return out;
}

/** What B sees of its own records, read with B's token (last-use times left out: they move). */
async function viewOf(t: TestApp, b: TenantWorld): Promise<string> {
  const urls = [
    ...[...b.finishedJobs, ...b.queuedJobs].map((id) => `/api/jobs/${id}`),
    ...b.finishedJobs.map((id) => `/api/jobs/${id}/logs`),
    ...b.finishedJobs.map((id) => `/api/jobs/${id}/artifacts`),
    ...b.uploads.map((id) => `/api/sources/${id}?repository=${encodeURIComponent(REPOSITORY)}`),
    "/api/jobs",
    "/api/credentials",
    "/api/repositories",
    `/api/repositories/${REPOSITORY}`,
    `/api/repositories/${B_ONLY_REPOSITORY}`,
    "/api/audit",
    "/api/tenant/settings",
  ];
  const parts: string[] = [];
  for (const url of urls) {
    const res = await t.app.inject({ method: "GET", url, headers: bearer(b.owner.token) });
    parts.push(`${url} ${res.statusCode} ${res.body}`);
  }
  const tokens = await t.app.inject({ method: "GET", url: "/api/cli/tokens", headers: bearer(b.spareCliToken.token) });
  parts.push(`/api/cli/tokens ${tokens.statusCode} ${tokens.body}`);
  return parts.join("\n").replace(/"last_used_at":(null|"[^"]*")/g, '"last_used_at":…');
}

interface Figures {
  probes: number;
  operations: Set<string>;
  leaks: string[];
  differences: string[];
  effects: string[];
  unreached: string[];
}

async function matrixOn(t: TestApp, figures: Figures): Promise<void> {
  const [a, b] = await populateTenants(t, 2);
  if (a === undefined || b === undefined) throw new Error("two tenants were not populated");
  await onboardRepository(
    t.storage,
    { tenantId: b.tenant, name: B_ONLY_REPOSITORY, onboardedBy: "test" },
    t.clock.now(),
  );
  const bOnly = B_ONLY_REPOSITORY.split("/") as [string, string];
  const manifests = new Map<string, string>();
  for (const upload of b.uploads) {
    const res = await t.app.inject({
      method: "GET",
      url: `/api/sources/${upload}?repository=${encodeURIComponent(REPOSITORY)}`,
      headers: bearer(b.owner.token),
    });
    manifests.set(upload, String((res.json() as { manifest_sha256?: string }).manifest_sha256));
  }
  const before = await viewOf(t, b);

  const probes = [
    ...CATALOGUE.filter((op) => op.security.kind === "tenant").flatMap((op) => probesOf(op, b, bOnly)),
    ...bodyAndQueryProbes(b, manifests),
  ];
  for (const probe of probes) {
    const foreign: Answer = await answerOf(t, probe.op, requestOf(probe, probe.foreign, a.owner.token));
    const twin: Answer = await answerOf(t, probe.op, requestOf(probe, probe.twin, a.owner.token));
    figures.probes += 1;
    figures.operations.add(probe.op.id);
    const where = `${probe.op.id} with ${probe.what}`;
    const shown = (x: Answer) => `${x.status} ${x.contentType} ${x.body.slice(0, 240)}`;
    if (process.env.KILN_T2_SHOW === "1") process.stderr.write(`${where}: ${shown(foreign)}\n`);
    const named = Object.values(probe.foreign).some((v) => v.length > 1 && foreign.body.includes(v));
    if (foreign.body.includes('"code":"invalid_request"') && !named) {
      // A probe refused as malformed, naming none of B's ids, never reached a lookup: it proves nothing.
      figures.unreached.push(`${where}: ${shown(foreign)}`);
      continue;
    }
    if (foreign.status < 400 && twin.status >= 400) {
      figures.leaks.push(`${where}: answered ${shown(foreign)}; a nonexistent id: ${shown(twin)}`);
      continue;
    }
    const same =
      foreign.status === twin.status &&
      foreign.contentType === twin.contentType &&
      foreign.body === asForeign(twin.body, probe);
    if (!same) figures.differences.push(`${where}: ${shown(foreign)} ≠ nonexistent id's ${shown(twin)}`);
  }

  // An upload id of B's reserved as A's own: A gets its own upload, B keeps B's.
  const reserved = b.uploads[1] ?? "";
  const archive = archiveOf([{ path: "Cargo.toml", content: `[package]\nname = "a-own"\n# ${a.tenant}\n` }]);
  const mine = await t.app.inject({
    method: "POST",
    url: "/api/sources",
    headers: { ...bearer(a.owner.token), "content-type": "application/json", "idempotency-key": reserved },
    payload: JSON.stringify(archive.reservation),
  });
  figures.probes += 1;
  const status = await t.app.inject({
    method: "GET",
    url: `/api/sources/${reserved}?repository=${encodeURIComponent(REPOSITORY)}`,
    headers: bearer(a.owner.token),
  });
  const seen = status.json() as { tenant?: string; manifest_sha256?: string };
  if (mine.statusCode !== 200 || seen.tenant !== a.tenant || seen.manifest_sha256 !== archive.manifestSha256) {
    figures.leaks.push(`sources.reserve with B's upload id as A's key: ${mine.statusCode} ${mine.body.slice(0, 200)}`);
  }

  const after = await viewOf(t, b);
  if (after !== before) {
    const beforeLines = before.split("\n");
    const afterLines = after.split("\n");
    afterLines.forEach((line, i) => {
      if (line !== beforeLines[i])
        figures.effects.push(`B's view changed: ${beforeLines[i]?.slice(0, 200)} → ${line.slice(0, 200)}`);
    });
  }
}

await runTrial("T2", "cross-tenant matrix", async () => {
  const figures: Figures = {
    probes: 0,
    operations: new Set(),
    leaks: [],
    differences: [],
    effects: [],
    unreached: [],
  };
  const engines: string[] = [];
  for (const dialect of trialDialects()) {
    const t = await testApp(await dialect.openFresh());
    try {
      await matrixOn(t, figures);
      engines.push(dialect.name);
    } finally {
      await t.close();
    }
  }
  return {
    figure:
      `${count(figures.probes)} probes of ${figures.operations.size} operations with another tenant's ids ` +
      `(${engines.join(" and ")}): ${figures.leaks.length} leaks, ${figures.differences.length} refusals differing from a ` +
      `nonexistent id's, ${figures.effects.length} changes to the other tenant's records`,
    broken: [
      ...figures.leaks.map((s) => `leak: ${s}`),
      ...figures.differences.map((s) => `differs: ${s}`),
      ...figures.effects.map((s) => `effect: ${s}`),
      ...figures.unreached.map((s) => `probe refused as malformed (fix the trial): ${s}`),
    ],
  };
});
