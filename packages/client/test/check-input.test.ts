import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inputProblems } from "../src/index.js";

describe("inputProblems: a request checked against its catalogue entry before it is sent", () => {
  it("is empty for a conforming request", () => {
    assert.deepEqual(
      inputProblems("operator.hosts.undrain", { params: { id: "builder-1" }, body: { policy_revision: 2 } }),
      [],
    );
    assert.deepEqual(inputProblems("operator.hosts.list", {}), []);
  });

  it("names the part and member of each problem, as the service's invalid_request would", () => {
    const problems = inputProblems("operator.hosts.undrain", {
      params: { id: "not an id!" },
      body: { policy_revision: "two", extra: true },
    });
    const where = problems.map((p) => `${p.part}${p.path}`);
    assert.ok(where.includes("params/id"), where.join(" "));
    assert.ok(where.includes("body/policy_revision"), where.join(" "));
    assert.ok(where.includes("body/extra"), where.join(" "));
    assert.deepEqual(
      inputProblems("operator.placements.receipt", { params: { job_id: "j1", vm_id: "v1" }, query: { page: 0 } }).map(
        (p) => `${p.part}${p.path}`,
      ),
      ["query/page"],
    );
  });

  it("refuses an id outside the catalogue", () => {
    assert.throws(() => inputProblems("operator.nothing", {}), /not in the catalogue/);
  });
});
