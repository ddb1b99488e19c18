// Two principals' calls through the AWS SDK for JavaScript v3, printed as one
// JSON object for test_iam.py to check.
// Usage: node js_iam_client.cjs SDK_DIR ENDPOINT REGION SPEC_JSON
//   SPEC_JSON: {"alice": [key, secret], "bob": [key, secret], "alice_stream": name}
"use strict";
const path = require("path");
const { createRequire } = require("module");

const [sdkDir, endpoint, region, specJson] = process.argv.slice(2);
const spec = JSON.parse(specJson);
const sdkRequire = createRequire(path.join(sdkDir, "package.json"));
const batchSdk = sdkRequire("@aws-sdk/client-batch");
const logsSdk = sdkRequire("@aws-sdk/client-cloudwatch-logs");

function clients(who) {
  const [accessKeyId, secretAccessKey] = spec[who];
  const common = { endpoint, region, credentials: { accessKeyId, secretAccessKey }, maxAttempts: 1 };
  return { batch: new batchSdk.BatchClient(common), logs: new logsSdk.CloudWatchLogsClient(common) };
}

async function outcome(promise) {
  try {
    const r = await promise;
    return { ok: true, value: r };
  } catch (e) {
    return { ok: false, name: e.name, status: e.$metadata && e.$metadata.httpStatusCode, message: e.message };
  }
}

async function main() {
  const alice = clients("alice");
  const bob = clients("bob");
  const out = {};
  const submit = (c, queue, def) => outcome(c.batch.send(new batchSdk.SubmitJobCommand({
    jobName: "js-" + queue, jobQueue: queue, jobDefinition: def,
    containerOverrides: { command: ["true"] } })));
  const a = await submit(alice, "qa", "defa");
  out.alice_submit_qa = { ok: a.ok, jobId: a.ok ? a.value.jobId : null, error: a.ok ? null : a };
  out.bob_submit_qa = await submit(bob, "qa", "defa");
  const queues = await outcome(bob.batch.send(new batchSdk.DescribeJobQueuesCommand({})));
  out.bob_describe_queues = queues.ok ? queues.value.jobQueues.map((q) => q.jobQueueName).sort() : queues;
  out.bob_reads_alice_stream = await outcome(bob.logs.send(new logsSdk.GetLogEventsCommand({
    logGroupName: "/aws/batch/job", logStreamName: spec.alice_stream, startFromHead: true })));
  const own = await outcome(alice.logs.send(new logsSdk.GetLogEventsCommand({
    logGroupName: "/aws/batch/job", logStreamName: spec.alice_stream, startFromHead: true })));
  out.alice_reads_own_stream = own.ok ? own.value.events.map((e) => e.message) : own;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e && e.stack || e) }));
  process.exit(1);
});
