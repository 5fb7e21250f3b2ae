// Command-line options of the benches: `--name value`.

/** The value after `--name` on the command line; `fallback` when `--name` is absent or last. */
export function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}

/** `--name N` as a number; throws unless N is a positive integer. */
export function positiveIntegerOption(name, fallback) {
  const value = Number(option(name, fallback));
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}
