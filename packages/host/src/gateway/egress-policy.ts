import { lookup as dnsLookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { GatewayError } from "./gateway-error.js";

/**
 * The dependency gateway's egress policy: what the host may reach on a tenant's behalf. The
 * gateway runs as root on the host, outside every sandbox, so a URL a workspace names
 * (`[registries]` index, a config.json `dl`, a redirect, a git dependency) is untrusted input:
 * taken at its word it reaches the host's files (`file://`, a bare path), runs programs (git's
 * `ext::`), or talks to whatever the host can reach and a job cannot (kiln's own listeners, a
 * cloud's metadata service at 169.254.169.254, the operator's private network).
 *
 * The rules, in one place (every fetch of the gateway, HTTP and git, asks this module):
 * - An operator's own upstreams are trusted: the origin of `KILN_CRATES_IO_INDEX` (scheme, host
 *   and port) is reached wherever it points, loopback included, as tests and outside harnesses
 *   point it at a loopback registry. What that upstream names elsewhere (its `dl`, a redirect)
 *   is held to the rules below like anything else.
 * - Everything else is a tenant's: https only (git over https; ssh only when the operator turns
 *   it on; plain http only to a host KILN_GATEWAY_ALLOW names), never file, fd, ext, data, ftp
 *   or a local path; never an address that is loopback, link-local, private, shared, reserved,
 *   multicast or unspecified, nor one of kiln's own listeners, unless the operator lists the
 *   host or its network in `KILN_GATEWAY_ALLOW` (kiln's own listeners stay refused even then).
 * - The address rule is applied to the address each connection is actually made to, after
 *   resolution (`addressesFor`, used as the connection's `lookup`, and by the CONNECT proxy git
 *   goes through): the name is resolved once, the addresses are checked, and the socket connects
 *   to a checked address. A name that answers a public address to a first lookup and a loopback
 *   one to the next (DNS rebinding) gains nothing, because there is no second lookup.
 *
 * A refusal is the tenant's (the job fails with cause `dependencies`): it names the URL and the
 * rule, and nothing any upstream said, because nothing was asked of it.
 */

/** One entry of KILN_GATEWAY_ALLOW: a host name or an address/network, optionally one port only. */
export interface AllowEntry {
  /** As the operator wrote it (named in messages). */
  readonly text: string;
  /** A host name (lowercase), matched against the URL's host. */
  readonly host: string | null;
  /** An address or network, matched against resolved addresses. */
  readonly network: { readonly address: string; readonly prefix: number; readonly family: "ipv4" | "ipv6" } | null;
  readonly port: number | null;
}

/** A listener of kiln's own (the API, the host listener): never reached on a tenant's behalf. */
export interface OwnListener {
  readonly host: string;
  readonly port: number;
}

export interface EgressRules {
  /** Origins an operator configured (`KILN_CRATES_IO_INDEX`'s): reached wherever they point. */
  readonly trustedOrigins: readonly string[];
  /** KILN_GATEWAY_ALLOW: hosts and networks an operator trusts (a private registry inside the network). */
  readonly allow: readonly AllowEntry[];
  /** kiln's own listeners on this machine. */
  readonly ownListeners: readonly OwnListener[];
  /** KILN_GATEWAY_GIT_SSH: git dependencies may also be fetched over ssh (through the same address rule). */
  readonly gitSsh: boolean;
  /**
   * KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS: a registry credential may be presented over plain
   * http to a loopback address (test registries); otherwise credentials go over https only.
   */
  readonly loopbackHttpCredentials: boolean;
}

export const NO_EGRESS_ALLOWANCES: Omit<EgressRules, "trustedOrigins"> = {
  allow: [],
  ownListeners: [],
  gitSsh: false,
  loopbackHttpCredentials: false,
};

/** A resolved address a connection may be made to. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to every address it has (the system resolver; tests give their own). */
export type Resolver = (host: string) => Promise<readonly ResolvedAddress[]>;

export const systemResolver: Resolver = async (host) =>
  (await dnsLookup(host, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/** What a fetch is for: the scheme rules differ (registries speak HTTP, git https or ssh). */
export type EgressPurpose = "registry" | "git";

/** Special-use address ranges a tenant's URL may not reach, each with the rule's name. */
const SPECIAL_RANGES: readonly { readonly rule: string; readonly ranges: readonly string[] }[] = [
  { rule: "a loopback address", ranges: ["127.0.0.0/8", "::1/128"] },
  { rule: "an unspecified address", ranges: ["0.0.0.0/8", "::/128"] },
  { rule: "a link-local address", ranges: ["169.254.0.0/16", "fe80::/10"] },
  {
    rule: "a private address",
    ranges: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7", "fec0::/10"],
  },
  { rule: "a multicast address", ranges: ["224.0.0.0/4", "ff00::/8"] },
  {
    rule: "a reserved address",
    ranges: [
      "192.0.0.0/24",
      "192.0.2.0/24",
      "192.88.99.0/24",
      "198.18.0.0/15",
      "198.51.100.0/24",
      "203.0.113.0/24",
      "240.0.0.0/4",
      "100::/64",
      "2001::/23",
      "2001:db8::/32",
      "64:ff9b:1::/48",
    ],
  },
];

const RANGE_LISTS = SPECIAL_RANGES.map(({ rule, ranges }) => {
  const list = new BlockList();
  for (const range of ranges) {
    const [address = "", prefix = "0"] = range.split("/");
    list.addSubnet(address, Number(prefix), isIP(address) === 6 ? "ipv6" : "ipv4");
  }
  return { rule, list };
});

const familyOf = (address: string): "ipv4" | "ipv6" => (isIP(address) === 6 ? "ipv6" : "ipv4");

/**
 * The IPv4 address an IPv6 address carries and routes to, if any: IPv4-mapped (::ffff:a.b.c.d),
 * NAT64 (64:ff9b::/96) and 6to4 (2002::/16). Checked as that IPv4 address too.
 */
function embeddedIpv4(address: string): string | null {
  if (familyOf(address) !== "ipv6") return null;
  const words = expandIpv6(address);
  if (words === null) return null;
  const v4 = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zero(0, 5) && words[5] === 0xffff) return v4(words[6] ?? 0, words[7] ?? 0);
  if (words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6)) return v4(words[6] ?? 0, words[7] ?? 0);
  if (words[0] === 0x2002) return v4(words[1] ?? 0, words[2] ?? 0);
  return null;
}

/** The eight 16-bit words of an IPv6 address (an embedded dotted quad included), or null. */
function expandIpv6(address: string): number[] | null {
  let text = address.toLowerCase().split("%")[0] ?? "";
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1] !== undefined) {
    const parts = dotted[1].split(".").map(Number);
    const [a = 0, b = 0, c = 0, d = 0] = parts;
    text = `${text.slice(0, -dotted[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const parse = (half: string) => (half === "" ? [] : half.split(":").map((w) => Number.parseInt(w, 16)));
  const head = parse(halves[0] ?? "");
  const tail = halves.length === 2 ? parse(halves[1] ?? "") : [];
  const missing = 8 - head.length - tail.length;
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return null;
  const words = [...head, ...Array.from({ length: missing }, () => 0), ...tail];
  return words.some((w) => !Number.isInteger(w) || w < 0 || w > 0xffff) ? null : words;
}

/** The special-use rule an address falls under (checked also as the IPv4 address it embeds), or null. */
export function specialUseOf(address: string): string | null {
  const candidates = [address, embeddedIpv4(address)].filter((a): a is string => a !== null);
  for (const candidate of candidates) {
    for (const { rule, list } of RANGE_LISTS) if (list.check(candidate, familyOf(candidate))) return rule;
  }
  return null;
}

/**
 * KILN_GATEWAY_ALLOW: entries separated by commas or white space, each a host name
 * (`registry.corp.example`), an address (`10.1.2.3`, `::1`), a network (`10.0.0.0/8`), or a host
 * name or address with one port (`registry.corp.example:8443`, `127.0.0.1:7000`, `[::1]:7000`).
 */
export function parseGatewayAllow(text: string | undefined): AllowEntry[] {
  const entries: AllowEntry[] = [];
  for (const raw of (text ?? "").split(/[\s,]+/).filter((t) => t !== "")) {
    const fail = (why: string): never => {
      throw new Error(`KILN_GATEWAY_ALLOW: ${JSON.stringify(raw)} ${why}`);
    };
    const slash = raw.indexOf("/");
    if (slash !== -1) {
      const address = raw.slice(0, slash);
      const prefix = Number(raw.slice(slash + 1));
      const family = isIP(address);
      if (family === 0) fail("is not a network (address/prefix)");
      if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32)) fail("has no valid prefix");
      entries.push({
        text: raw,
        host: null,
        network: { address, prefix, family: family === 6 ? "ipv6" : "ipv4" },
        port: null,
      });
      continue;
    }
    let host = raw;
    let port: number | null = null;
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(raw);
    if (bracketed !== null) {
      host = bracketed[1] ?? "";
      port = bracketed[2] === undefined ? null : Number(bracketed[2]);
    } else if (isIP(raw) !== 6) {
      const colon = raw.lastIndexOf(":");
      if (colon !== -1) {
        host = raw.slice(0, colon);
        port = Number(raw.slice(colon + 1));
      }
    }
    if (port !== null && (!Number.isInteger(port) || port < 1 || port > 65535)) fail("names an impossible port");
    const family = isIP(host);
    if (family !== 0) {
      entries.push({
        text: raw,
        host: null,
        network: { address: host, prefix: family === 6 ? 128 : 32, family: family === 6 ? "ipv6" : "ipv4" },
        port,
      });
    } else if (/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(host)) {
      entries.push({ text: raw, host: host.toLowerCase(), network: null, port });
    } else fail("is neither a host name, an address nor a network");
  }
  return entries;
}

/** The URL's port, or its scheme's default. */
export function portOf(url: URL): number {
  if (url.port !== "") return Number(url.port);
  return url.protocol === "http:" ? 80 : url.protocol === "ssh:" ? 22 : 443;
}

/** The URL's host name without IPv6 brackets. */
export function hostnameOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
}

/** The origin of a URL (scheme, host and port), also for `sparse+` index URLs. */
export function originOf(url: string): string {
  const parsed = new URL(url.startsWith("sparse+") ? url.slice("sparse+".length) : url);
  return `${parsed.protocol}//${parsed.host}`;
}

/**
 * A URL as a message shows it: as the workspace wrote it (without query or userinfo), or only its
 * origin when an upstream named it (a redirect's target, a config.json's `dl`): what an upstream
 * sent is not repeated beyond the host it sends the gateway to.
 */
export function shownUrl(url: URL | string, fromUpstream: boolean): string {
  if (!fromUpstream) return urlForMessage(url);
  try {
    const parsed = typeof url === "string" ? new URL(url) : url;
    return `${parsed.protocol}//${parsed.host}`;
  } catch {
    return "a URL that does not parse";
  }
}

/** A refusal of the policy: the job's own (cause `dependencies`), naming the URL and the rule. */
export function egressRefusal(what: string, rule: string): GatewayError {
  return new GatewayError("egress_refused", `${what} is refused: ${rule}`);
}

/** Only the parts of a URL worth naming: never its credentials, query or fragment. */
export function urlForMessage(url: URL | string): string {
  try {
    const copy = new URL(typeof url === "string" ? url : url.href);
    copy.username = "";
    copy.password = "";
    copy.search = "";
    copy.hash = "";
    return copy.href;
  } catch {
    // Not a URL at all (a path, `fd::17`): said as written, bounded.
    const text = String(url);
    return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
  }
}

export class EgressPolicy {
  readonly #allowList = new BlockList();
  readonly #allowByPort = new Map<number, BlockList>();
  readonly #trusted: ReadonlySet<string>;

  constructor(
    readonly rules: EgressRules,
    private readonly resolver: Resolver = systemResolver,
  ) {
    this.#trusted = new Set(rules.trustedOrigins.map((o) => originOf(o)));
    for (const entry of rules.allow) {
      if (entry.network === null) continue;
      let list = this.#allowList;
      if (entry.port !== null) {
        list = this.#allowByPort.get(entry.port) ?? new BlockList();
        this.#allowByPort.set(entry.port, list);
      }
      list.addSubnet(entry.network.address, entry.network.prefix, entry.network.family);
    }
  }

  /** Whether the URL's origin is one an operator configured. */
  isTrusted(url: URL): boolean {
    return this.#trusted.has(`${url.protocol}//${url.host}`);
  }

  /** Whether KILN_GATEWAY_ALLOW names this host (by name, or as an address literal) at this port. */
  #allowsHost(host: string, port: number): boolean {
    return this.rules.allow.some((e) => e.host === host && (e.port === null || e.port === port))
      ? true
      : isIP(host) !== 0 && this.#allowsAddress(host, port);
  }

  #allowsAddress(address: string, port: number): boolean {
    const family = familyOf(address);
    return this.#allowList.check(address, family) || (this.#allowByPort.get(port)?.check(address, family) ?? false);
  }

  /**
   * The URL, checked before anything is asked of it: its scheme for the purpose, and an address
   * literal's address. Returns the parsed URL; throws the refusal naming the rule.
   */
  checkUrl(raw: string, purpose: EgressPurpose, what: string, fromUpstream = false): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw egressRefusal(
        `${what} ${shownUrl(raw, fromUpstream)}`,
        purpose === "git"
          ? "a git dependency must be an https:// URL (never a local path, file, fd or ext)"
          : "it is not a URL",
      );
    }
    const named = `${what} ${shownUrl(url, fromUpstream)}`;
    // ssh names its user in the URL (git@…); anything else there is a credential.
    if (url.password !== "" || (url.username !== "" && url.protocol !== "ssh:")) {
      throw egressRefusal(named, "a URL may not carry credentials (registry credentials are registered with kiln)");
    }
    if (this.isTrusted(url)) return url;
    const host = hostnameOf(url);
    const port = portOf(url);
    if (purpose === "git") {
      if (url.protocol === "ssh:" && !this.rules.gitSsh) {
        throw egressRefusal(named, "git over ssh is not enabled on this host (KILN_GATEWAY_GIT_SSH); use https://");
      }
      if (url.protocol !== "https:" && url.protocol !== "ssh:") {
        throw egressRefusal(
          named,
          `git dependencies are fetched over https only (${url.protocol.replace(/:$/, "")} is never used: no file, fd, ext, http or local paths)`,
        );
      }
    } else if (url.protocol === "http:") {
      if (!this.#allowsHost(host, port)) {
        throw egressRefusal(
          named,
          "registries are reached over https only (plain http only to a host KILN_GATEWAY_ALLOW names)",
        );
      }
    } else if (url.protocol !== "https:") {
      throw egressRefusal(
        named,
        `registries are reached over https only (${url.protocol.replace(/:$/, "")} is never used)`,
      );
    }
    if (isIP(host) !== 0) {
      const refused = this.#addressRule(host, port);
      if (refused !== null) throw egressRefusal(named, `${refused.subject} is ${refused.rule}`);
    }
    return url;
  }

  /**
   * The rule refusing a connection to `address:port` on a tenant's behalf, or null when it may
   * be made: kiln's own listeners always; special-use addresses unless KILN_GATEWAY_ALLOW lists them.
   */
  #addressRule(
    address: string,
    port: number,
    hostAllowed = false,
  ): { readonly subject: string; readonly rule: string } | null {
    if (this.#isOwnListener(address, port))
      return { subject: `${address}:${port}`, rule: "one of kiln's own listeners" };
    if (hostAllowed || this.#allowsAddress(address, port)) return null;
    const special = specialUseOf(address);
    return special === null
      ? null
      : {
          subject: address,
          rule: `${special}, which the dependency gateway reaches only where an operator allows it (KILN_GATEWAY_ALLOW)`,
        };
  }

  #isOwnListener(address: string, port: number): boolean {
    return this.rules.ownListeners.some((listener) => {
      if (listener.port !== port) return false;
      if (listener.host === address) return true;
      const loopback = (a: string) => specialUseOf(a) === "a loopback address" || a === "localhost";
      if (loopback(listener.host) && loopback(address)) return true;
      if (listener.host === "0.0.0.0" || listener.host === "::" || listener.host === "") {
        return loopback(address) || localAddresses().has(address);
      }
      return false;
    });
  }

  /**
   * The addresses a connection to the URL's host may use: every address the name resolves to
   * that the rules permit (the operator's upstreams: every one). Throws the refusal when none is.
   * Used as the connection's own lookup, so the socket connects to an address checked here.
   */
  async addressesFor(url: URL, what: string, fromUpstream = false): Promise<ResolvedAddress[]> {
    const host = hostnameOf(url);
    const literal = isIP(host);
    const trusted = this.isTrusted(url);
    const port = portOf(url);
    const named = `${what} ${shownUrl(url, fromUpstream)}`;
    if (literal !== 0) {
      const refused = trusted ? null : this.#addressRule(host, port);
      if (refused !== null) throw egressRefusal(named, `${refused.subject} is ${refused.rule}`);
      return [{ address: host, family: literal === 6 ? 6 : 4 }];
    }
    let resolved: readonly ResolvedAddress[];
    try {
      resolved = await this.resolver(host);
    } catch {
      throw new GatewayError("upstream_unreachable", `${named}: the host name ${host} does not resolve`);
    }
    if (trusted) return [...resolved];
    // A host KILN_GATEWAY_ALLOW names is the operator's: whatever it resolves to (but kiln itself).
    const hostAllowed = this.rules.allow.some((e) => e.host === host && (e.port === null || e.port === port));
    const permitted: ResolvedAddress[] = [];
    let firstRefusal: { readonly subject: string; readonly rule: string } | null = null;
    for (const candidate of resolved) {
      const refused = this.#addressRule(candidate.address, port, hostAllowed);
      if (refused === null) permitted.push(candidate);
      else firstRefusal ??= refused;
    }
    if (permitted.length === 0) {
      // The rule, not the address: a tenant's name must not become a way to read the host's DNS.
      throw egressRefusal(
        named,
        firstRefusal === null ? `${host} resolves to no address` : `${host} resolves to ${firstRefusal.rule}`,
      );
    }
    return permitted;
  }

  /**
   * Whether a registry credential registered for `registry` (a host, optionally `:port`, as
   * tenant.registry_credential.replace records it) may be presented to this URL: only at that
   * origin, over https, or over plain http to a loopback address when the operator allows it.
   */
  credentialOriginMatches(registry: string, url: URL): boolean {
    if (url.host.toLowerCase() !== registry.toLowerCase()) return false;
    if (url.protocol === "https:") return true;
    return (
      url.protocol === "http:" &&
      this.rules.loopbackHttpCredentials &&
      specialUseOf(hostnameOf(url)) === "a loopback address"
    );
  }
}

let cachedLocalAddresses: { readonly at: number; readonly addresses: Set<string> } | null = null;

/** The addresses of this machine's interfaces (a listener on 0.0.0.0 answers at each), refreshed each minute. */
function localAddresses(): Set<string> {
  const now = Date.now();
  if (cachedLocalAddresses === null || now - cachedLocalAddresses.at > 60_000) {
    const addresses = new Set<string>();
    for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) addresses.add(a.address);
    cachedLocalAddresses = { at: now, addresses };
  }
  return cachedLocalAddresses.addresses;
}
