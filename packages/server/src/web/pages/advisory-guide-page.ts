import { readFile } from "node:fs/promises";
import type { FastifyInstance } from "fastify";
import { refuse } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { escapeHtml } from "./html.js";
import { dashboardPages } from "./open-page.js";

/**
 * Each advisory kind's remediation guide is one page of kiln's docs, `docs/advisories/<key>.md`
 * (an advisory's `remediation_href`, a path in kiln's repository, not a URL a browser can open
 * from a repository page). The dashboard serves it at `/advisories/<key>`, read from the same
 * file, so the guide is written once.
 */
const GUIDES = new URL("../../../../../../docs/advisories/", import.meta.url);

/** The dashboard page of an advisory's guide, from its `remediation_href` (`docs/advisories/<key>.md`). */
export function advisoryGuidePath(remediationHref: string): string {
  const key = /^docs\/advisories\/([a-z0-9-]+)\.md$/.exec(remediationHref)?.[1];
  if (key === undefined)
    throw new Error(`an advisory's remediation_href is not a guide of docs/advisories: ${remediationHref}`);
  return `/advisories/${key}`;
}

/** `code` spans and `**strong**` runs of one escaped line of the guides' Markdown. */
function inline(text: string): string {
  return escapeHtml(text)
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>");
}

/**
 * The guides' Markdown as HTML: the subset they use (a `#` title, paragraphs, `-` lists whose
 * items may continue on indented lines, code spans, strong). Every character is escaped first.
 */
export function renderGuide(markdown: string): { title: string; body: string } {
  let title = "";
  const blocks: string[] = [];
  for (const block of markdown.split(/\n\s*\n/)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    const [first] = lines;
    if (first === undefined) continue;
    if (first.startsWith("# ")) {
      title = first.slice(2).trim();
      continue;
    }
    if (first.startsWith("- ")) {
      const items: string[] = [];
      for (const line of lines) {
        if (line.startsWith("- ")) items.push(line.slice(2));
        else items[items.length - 1] = `${items.at(-1) ?? ""} ${line.trim()}`;
      }
      blocks.push(`<ul>${items.map((i) => `<li>${inline(i)}</li>`).join("")}</ul>`);
      continue;
    }
    blocks.push(`<p>${inline(lines.map((l) => l.trim()).join(" "))}</p>`);
  }
  return { title, body: blocks.join("\n") };
}

/** The guide of advisory kind `key`, or undefined when there is none. */
async function readGuide(key: string): Promise<string | undefined> {
  // Kinds are lower-case words and dashes: nothing else names a file there (README.md included).
  if (!/^[a-z0-9-]+$/.test(key)) return undefined;
  try {
    return await readFile(new URL(`${key}.md`, GUIDES), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** `GET /advisories/<key>`: an advisory kind's guide, for any signed-in person. */
export function registerAdvisoryGuidePage(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const pages = dashboardPages(deps, handlers);
  app.get("/advisories/:key", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const { key } = request.params as { key: string };
    try {
      const markdown = await readGuide(key);
      if (markdown === undefined) refuse("not_found", `no advisory guide ${key}`);
      const guide = renderGuide(markdown);
      return await pages.send(ctx, 200, {
        title: guide.title === "" ? key : guide.title,
        body: `<article id="advisory-guide" data-advisory-kind="${escapeHtml(key)}">${guide.body}</article>
<p><a href="/repositories">Repositories</a></p>`,
      });
    } catch (error) {
      return pages.refused(ctx, "Advisory guide", error, { href: "/repositories", label: "Repositories" });
    }
  });
}
