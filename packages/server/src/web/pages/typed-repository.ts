/**
 * A repository as people type or paste it — `acme/widget`, ` acme/widget `, a browser's
 * `https://github.com/acme/widget`, a clone URL `https://github.com/acme/widget.git` or
 * `git@github.com:acme/widget.git` — as the `owner/name` the operations take. Anything else is
 * returned trimmed, for the operation to refuse naming the field.
 */
export function typedRepository(typed: string): string {
  const text = typed.trim();
  const fromUrl =
    /^(?:https?:\/\/[^/\s]+\/|git@[^:\s]+:|ssh:\/\/git@[^/\s]+\/)([^/\s]+)\/([^/\s]+?)(?:\.git)?\/?$/.exec(text);
  if (fromUrl !== null) return `${fromUrl[1]}/${fromUrl[2]}`;
  return text.replace(/\s*\/\s*/, "/").replace(/\.git$/, "");
}
