import { spawn } from "node:child_process";

/**
 * The command that shows a URL in a browser here, or null when there is none to use: `$BROWSER`
 * (its first entry, as `sensible-browser` and Python's webbrowser read it; `%s` stands for the
 * URL), `open` on macOS, `xdg-open` where a display is (X11 or Wayland). A server or a CI runner
 * has none: the URL printed is the answer there.
 */
export function browserCommand(
  url: string,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string[] | null {
  const configured = (env.BROWSER ?? "").split(":")[0]?.trim() ?? "";
  if (configured !== "") {
    const words = configured.split(/\s+/);
    return words.some((w) => w.includes("%s")) ? words.map((w) => w.replaceAll("%s", url)) : [...words, url];
  }
  if (platform === "darwin") return ["open", url];
  if (platform === "linux" && (env.DISPLAY || env.WAYLAND_DISPLAY)) return ["xdg-open", url];
  return null;
}

/**
 * Starts the browser on the URL, detached (it outlives the command), and says whether it
 * started; a browser that cannot be started is never an error of the command.
 */
export function openInBrowser(command: readonly string[]): Promise<boolean> {
  const [program, ...args] = command;
  if (program === undefined) return Promise.resolve(false);
  return new Promise((resolve) => {
    const child = spawn(program, args, { detached: true, stdio: "ignore" });
    child.once("error", () => resolve(false));
    child.once("spawn", () => {
      child.unref();
      resolve(true);
    });
  });
}
