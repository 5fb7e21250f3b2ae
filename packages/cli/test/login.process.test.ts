import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient, KilnRefusal } from "@kiln/client";
import { systemClock } from "@kiln/contract";
import { openSqliteForTest } from "@kiln/storage/testing";
import { freshConfigHome, runCli, serverTesting, startCli, until } from "./harness.js";

describe("kiln login / whoami / logout against a real server", () => {
  let endpoint: string;
  let close: () => Promise<void>;
  let approve: (userCode: string) => Promise<void>;
  let admin: { tenant: string; userId: string; token: string };

  before(async () => {
    const { testApp, personWithToken, signIn } = await serverTesting();
    // The system clock: the CLI really waits the poll interval, so the server must see time pass.
    const t = await testApp(await openSqliteForTest(), { clock: systemClock });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    endpoint = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    close = t.close;
    admin = await personWithToken(t.storage, { role: "admin", now: new Date() });
    const person = await t.storage.db
      .selectFrom("persons")
      .select("email")
      .where("id", "=", admin.userId)
      .executeTakeFirstOrThrow();
    approve = async (userCode) => {
      // A real signed-in session approves the code, as a person in the dashboard does.
      const cookie = await signIn(t.app, t.storage, person.email, undefined, systemClock);
      const res = await t.app.inject({
        method: "POST",
        url: `/api/device/approve?user_code=${encodeURIComponent(userCode)}`,
        headers: {
          cookie: `kiln_session=${cookie}`,
          "idempotency-key": `approve-${userCode}`,
          origin: "http://kiln.test",
        },
      });
      assert.equal(res.statusCode, 200, res.body);
    };
  });
  after(() => close());

  it("login prints the URL and code, stores the token 0600; whoami uses it; logout revokes and removes it", async () => {
    const home = freshConfigHome();
    const env = { XDG_CONFIG_HOME: home, KILN_ENDPOINT: endpoint };
    const login = startCli(["login"], { env });
    let userCode = "";
    await until(
      () => {
        const m = /confirm the code ([A-Z]{4}-[A-Z]{4})/.exec(login.stderr());
        userCode = m?.[1] ?? "";
        return userCode !== "";
      },
      15_000,
      () => `no user code in: ${login.stderr()}`,
    );
    assert.match(login.stderr(), new RegExp(`http://kiln\\.test/device\\?user_code=${userCode}`));
    await approve(userCode);
    const finished = await login.done;
    assert.equal(finished.code, 0, finished.stderr);
    assert.match(finished.stdout, /Logged in to/);

    const path = join(home, "kiln", "credentials.json");
    assert.ok(existsSync(path));
    assert.equal(statSync(path).mode & 0o777, 0o600, "the token file is private to its owner");
    const stored = JSON.parse(readFileSync(path, "utf8")) as { token: string; endpoint: string; token_id: string };
    assert.match(stored.token, /^kiln_cli_/);
    assert.equal(stored.endpoint, endpoint);
    assert.ok(stored.token_id, "login read the issued token's id");
    const config = JSON.parse(readFileSync(join(home, "kiln", "config.json"), "utf8")) as { endpoint: string };
    assert.equal(config.endpoint, endpoint);

    // whoami with nothing but the stored login (the endpoint comes from config.json too).
    const who = await runCli(["whoami", "--json"], { env: { XDG_CONFIG_HOME: home } });
    assert.equal(who.code, 0, who.stderr);
    const identity = JSON.parse(who.stdout) as { principal: string; tenant: string; credential_source: string };
    assert.equal(identity.principal, admin.userId);
    assert.equal(identity.tenant, admin.tenant);
    assert.equal(identity.credential_source, "login");
    const human = await runCli(["whoami"], { env: { XDG_CONFIG_HOME: home } });
    assert.match(human.stdout, new RegExp(`tenant\\s+${admin.tenant}`));

    // KILN_TOKEN wins over the stored login.
    const agent = await runCli(["whoami", "--json"], { env: { XDG_CONFIG_HOME: home, KILN_TOKEN: admin.token } });
    assert.equal((JSON.parse(agent.stdout) as { credential_source: string }).credential_source, "KILN_TOKEN");

    const logout = await runCli(["logout", "--json"], { env: { XDG_CONFIG_HOME: home } });
    assert.equal(logout.code, 0, logout.stderr);
    assert.equal((JSON.parse(logout.stdout) as { revoked: boolean }).revoked, true);
    assert.equal(existsSync(path), false, "logout removed the token file");
    await assert.rejects(
      createClient({ endpoint, token: stored.token }).call("identity.current", {}),
      (error: unknown) => error instanceof KilnRefusal && error.code === "credential_revoked",
    );

    const after = await runCli(["whoami"], { env: { XDG_CONFIG_HOME: home } });
    assert.equal(after.code, 2);
    assert.match(after.stderr, /no credential .*kiln login/);
  });

  it("login --server signs in to that service without KILN_ENDPOINT, and later commands use it; a bad URL is refused", async () => {
    const home = freshConfigHome();
    const login = startCli(["login", "--server", `${endpoint}/`], { env: { XDG_CONFIG_HOME: home } });
    let userCode = "";
    await until(
      () => {
        userCode = /confirm the code ([A-Z]{4}-[A-Z]{4})/.exec(login.stderr())?.[1] ?? "";
        return userCode !== "";
      },
      15_000,
      () => `no user code in: ${login.stderr()}`,
    );
    assert.match(login.stderr(), new RegExp(`To sign in to kiln at ${endpoint.replaceAll(".", "\\.")},`));
    await approve(userCode);
    const finished = await login.done;
    assert.equal(finished.code, 0, finished.stderr);
    const who = await runCli(["whoami", "--json"], { env: { XDG_CONFIG_HOME: home } });
    assert.equal(who.code, 0, who.stderr);
    assert.equal((JSON.parse(who.stdout) as { endpoint: string }).endpoint, endpoint);

    const refused = await runCli(["login", "--server", "kiln.example.com"], { env: { XDG_CONFIG_HOME: home } });
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--server must be the service's URL, e\.g\. https:\/\/kiln\.example\.com/);
  });

  it("a refusal prints its code, detail and next step, without the operation id; --json prints the Refusal document", async () => {
    const home = freshConfigHome();
    const env = { XDG_CONFIG_HOME: home, KILN_ENDPOINT: endpoint, KILN_TOKEN: "kiln_cli_not-a-real-token-at-all" };
    const text = await runCli(["whoami"], { env });
    assert.equal(text.code, 2);
    assert.match(text.stderr, /refused \(unauthenticated\): /);
    // In the user's words: the next step, never the operation's id.
    assert.match(text.stderr, /sign in with `kiln login`/);
    assert.doesNotMatch(text.stderr, /identity\.current/);
    const json = await runCli(["jobs", "list", "--json"], { env });
    assert.equal(json.code, 2);
    assert.equal((JSON.parse(json.stdout) as { code: string }).code, "unauthenticated");
  });
});
