// Command-line options of the benches: `--name value`.

/** The value after `--name` on the command line; `fallback` when `--name` is absent or last. */
export function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}
