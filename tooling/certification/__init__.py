"""The certification self-check: play the Gateway over real MCP and prove the seed's seven checks.

`run.Certification(url, token, contacts=[...]).run()` connects with the official `mcp` SDK
client, as the platform's Gateway would (bearer token, `com.asixto/conversationId` and a
deterministic `com.asixto/idempotencyKey` derived from the conversation, the tool and its
arguments), and drives a scripted set of conversations through the tools. Every probe becomes a
`Row`: the check it belongs to, what was sent, what came back, and whether that proves the
guarantee. Effects are never assumed: each "one effect" or "no effect" is counted through a read.

It refuses any company that is not a declared sandbox, before any write (`preflight`): the probe
is a read (`list_services`) sent with the sandbox-only fault switch
`_meta["com.garante/fault"] = "database"`. A sandbox company honours it (its database access
fails for real and the answer is SYSTEM); a production company ignores it, so a success means
production.

Modules, in the order a run uses them:

- `exchange`: what the Gateway sent and got (`Contact`, `Exchange`), the rows and the report
  (`CHECKS`, `Row`, `Report`);
- `gateway`: tool calls over one SDK client, with the Gateway's idempotency keys;
- `answers`: reading lists, references and states out of tool answers;
- `verdicts`: the pure row evaluations (`verdict_*`), so tests can feed them wrong answers;
- `scenario`: what every scenario shares (conversations, earlier results, the probe);
- `preflight`: refuse a company that is not a sandbox;
- `agenda`, `sales`, `support`: the scripted conversations of each domain (checks 1 to 5);
- `outcomes`: check 7 (no results, missing data, bad arguments, outages, error shapes);
- `responses`: check 6, every answer of the run inspected (`response_problems`);
- `run`: `Certification`, which connects, runs the scenarios in order and fills the report.
"""
