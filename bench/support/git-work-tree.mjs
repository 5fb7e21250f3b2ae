// A bench's project as a developer has it: a git work tree with one commit (what `kiln cargo`
// captures from).
import { execFileSync } from "node:child_process";

/** Makes `dir` a git work tree whose one commit, `message`, holds everything in it. */
export function commitWorkTree(dir, message) {
  const git = (...args) =>
    execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@kiln.invalid", ...args], {
      cwd: dir,
      stdio: "ignore",
    });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", message);
}
