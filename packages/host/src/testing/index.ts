export { cgroupDirectoriesNamed } from "./cgroup-directories.js";
