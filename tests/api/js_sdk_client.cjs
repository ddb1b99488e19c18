// Drives a lote server with the AWS SDK for JavaScript v3 and prints one JSON
// object of results for test_js_sdk.py to check.
// Usage: node js_sdk_client.cjs SDK_DIR ENDPOINT KEY SECRET REGION
"use strict";
const path = require("path");
const { createRequire } = require("module");

const [sdkDir, endpoint, accessKeyId, secretAccessKey, region] = process.argv.slice(2);
const sdkRequire = createRequire(path.join(sdkDir, "package.json"));
const batchSdk = sdkRequire("@aws-sdk/client-batch");
const logsSdk = sdkRequire("@aws-sdk/client-cloudwatch-logs");

const common = { endpoint, region, credentials: { accessKeyId, secretAccessKey } };

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return { name: e.name, status: e.$metadata && e.$metadata.httpStatusCode, message: e.message };
  }
}

async function main() {
  const out = {};
  const batch = new batchSdk.BatchClient(common);
  const logs = new logsSdk.CloudWatchLogsClient(common);

  // A burst of 50 parallel requests from one client (it opens up to 50 sockets).
  let t0 = Date.now();
  const burst = await Promise.allSettled(
    Array.from({ length: 50 }, () => batch.send(new batchSdk.DescribeJobQueuesCommand({}))));
  out.batch_burst_ok = burst.filter((r) => r.status === "fulfilled").length;
  out.batch_burst_errors = burst.filter((r) => r.status === "rejected").map((r) => String(r.reason)).slice(0, 3);
  out.batch_burst_ms = Date.now() - t0;
  t0 = Date.now();
  const logsBurst = await Promise.allSettled(
    Array.from({ length: 50 }, () => logs.send(new logsSdk.DescribeLogGroupsCommand({}))));
  out.logs_burst_ok = logsBurst.filter((r) => r.status === "fulfilled").length;
  out.logs_burst_errors = logsBurst.filter((r) => r.status === "rejected").map((r) => String(r.reason)).slice(0, 3);
  out.logs_burst_ms = Date.now() - t0;

  // Real work through the SDK.
  await batch.send(new batchSdk.CreateComputeEnvironmentCommand({
    computeEnvironmentName: "js-ce", type: "UNMANAGED" }));
  const ces = await batch.send(new batchSdk.DescribeComputeEnvironmentsCommand({ computeEnvironments: ["js-ce"] }));
  out.ce_names = ces.computeEnvironments.map((c) => c.computeEnvironmentName);
  await logs.send(new logsSdk.CreateLogGroupCommand({ logGroupName: "/js/group" }));
  await logs.send(new logsSdk.CreateLogStreamCommand({ logGroupName: "/js/group", logStreamName: "s" }));
  await logs.send(new logsSdk.PutLogEventsCommand({ logGroupName: "/js/group", logStreamName: "s",
    logEvents: [{ timestamp: Date.now(), message: "héllo from js" }] }));
  const ev = await logs.send(new logsSdk.GetLogEventsCommand({ logGroupName: "/js/group", logStreamName: "s", startFromHead: true }));
  out.log_messages = ev.events.map((e) => e.message);

  // Errors arrive as the modelled exception classes.
  out.bad_name = await errorOf(batch.send(new batchSdk.CreateJobQueueCommand({
    jobQueueName: "café", priority: 1, computeEnvironmentOrder: [] })));
  out.missing_group = await errorOf(logs.send(new logsSdk.DescribeLogStreamsCommand({ logGroupName: "/nope" })));

  // A client whose clock is 20 minutes off (this process's Date.now is moved
  // while it runs): its first attempt is refused (signature expired / not yet
  // current); the SDK reads the server's Date, corrects its clock offset and retries.
  const realNow = Date.now;
  for (const [name, Client, Command] of [
    ["batch", batchSdk.BatchClient, batchSdk.DescribeJobQueuesCommand],
    ["logs", logsSdk.CloudWatchLogsClient, logsSdk.DescribeLogGroupsCommand],
  ]) {
    for (const skewMinutes of [-20, 20]) {
      const key = `${name}_skew_${skewMinutes < 0 ? "behind" : "ahead"}`;
      Date.now = () => realNow() + skewMinutes * 60 * 1000;
      try {
        const skewed = new Client(common);
        const r = await skewed.send(new Command({}));
        out[key] = { ok: true, attempts: r.$metadata.attempts, offset_ms: skewed.config.systemClockOffset };
      } catch (e) {
        out[key] = { ok: false, error: e.name + ": " + e.message };
      } finally {
        Date.now = realNow;
      }
    }
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e && e.stack || e) }));
  process.exit(1);
});
