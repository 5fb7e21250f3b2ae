import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  cgroupDirectory,
  hierarchyKey,
  parseCgroupLayout,
  parseProcessCgroups,
} from "../src/executor/shared/cgroup-layout.js";

/** A systemd machine in unified mode (Debian 12 default). */
const PURE_V2 = `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`;

/** A pure v1 machine: cpu and cpuacct co-mounted, net_cls,net_prio too, plus the named systemd hierarchy. */
const PURE_V1 = `31 23 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:29 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,xattr,name=systemd
33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,memory
35 31 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,pids
36 31 0:33 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,freezer
37 31 0:34 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,net_cls,net_prio
`;

/** The hybrid layout of the machine kiln is developed on: v1 controllers plus cgroup2 at /sys/fs/cgroup/unified. */
const HYBRID = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;

/** The same hybrid layout as /proc/mounts shows it (no mountinfo on the machine). */
const HYBRID_PROC_MOUNTS = `tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
`;

const controllersAt = (text: string) => () => text;

describe("cgroup layout detection", () => {
  it("recognises pure cgroup v2 and reads its controllers from cgroup.controllers", () => {
    const layout = parseCgroupLayout(PURE_V2, controllersAt("cpuset cpu io memory hugetlb pids rdma misc\n"));
    assert.equal(layout.kind, "v2");
    assert.deepEqual(layout.v1, []);
    assert.equal(layout.unified?.mountPoint, "/sys/fs/cgroup");
    assert.deepEqual(layout.unified?.controllers, ["cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"]);
  });

  it("recognises pure cgroup v1, co-mounted controllers included, and ignores named hierarchies", () => {
    const layout = parseCgroupLayout(PURE_V1, () => null);
    assert.equal(layout.kind, "v1");
    assert.equal(layout.unified, null);
    assert.deepEqual(
      layout.v1.map((h) => [h.mountPoint, h.controllers.join(",")]),
      [
        ["/sys/fs/cgroup/cpu,cpuacct", "cpu,cpuacct"],
        ["/sys/fs/cgroup/memory", "memory"],
        ["/sys/fs/cgroup/pids", "pids"],
        ["/sys/fs/cgroup/freezer", "freezer"],
        ["/sys/fs/cgroup/net_cls,net_prio", "net_cls,net_prio"],
      ],
    );
  });

  it("recognises the hybrid layout: v1 controllers plus a controller-less cgroup2 mount", () => {
    const layout = parseCgroupLayout(HYBRID, controllersAt(""));
    assert.equal(layout.kind, "hybrid");
    assert.equal(layout.unified?.mountPoint, "/sys/fs/cgroup/unified");
    assert.deepEqual(layout.unified?.controllers, []);
    const controllers = layout.v1.flatMap((h) => h.controllers).sort();
    assert.deepEqual(controllers, ["blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "pids"]);
    assert.equal(layout.v1.find((h) => h.controllers.includes("memory"))?.mountPoint, "/sys/fs/cgroup/memory");
  });

  it("reads /proc/mounts as well as mountinfo", () => {
    const layout = parseCgroupLayout(HYBRID_PROC_MOUNTS, controllersAt(""));
    assert.equal(layout.kind, "hybrid");
    assert.deepEqual(
      layout.v1.map((h) => h.controllers[0]),
      ["cpu", "memory", "pids"],
    );
  });

  it("reports none without any cgroup mount", () => {
    assert.equal(parseCgroupLayout("22 27 0:21 / /proc rw,relatime - proc proc rw\n", () => null).kind, "none");
  });

  it("maps /proc/self/cgroup paths to directories, including mounts rooted below the hierarchy's root", () => {
    const own = parseProcessCgroups("9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/user.slice\n");
    assert.equal(own.get("memory"), "/process_api/abc");
    assert.equal(own.get("cpu,cpuacct"), "/");
    assert.equal(own.get("v2"), "/user.slice");
    const memory = parseCgroupLayout(HYBRID, controllersAt("")).v1.find((h) => h.controllers.includes("memory"));
    assert.ok(memory !== undefined);
    assert.equal(
      cgroupDirectory(memory, own.get(hierarchyKey(memory)) ?? "/"),
      "/sys/fs/cgroup/memory/process_api/abc",
    );
    // Inside a container the mount shows /docker/x as its root.
    const rooted = {
      version: 2 as const,
      mountPoint: "/sys/fs/cgroup",
      mountRoot: "/docker/x",
      controllers: ["memory"],
    };
    assert.equal(cgroupDirectory(rooted, "/docker/x/agent"), "/sys/fs/cgroup/agent");
    assert.equal(cgroupDirectory(rooted, "/elsewhere"), "/sys/fs/cgroup");
  });
});
