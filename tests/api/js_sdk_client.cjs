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
const s3Sdk = sdkRequire("@aws-sdk/client-s3");

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

  // S3: the SDK's defaults (CRC32 checksums on uploads, path style for an IP endpoint).
  const s3 = new s3Sdk.S3Client({ ...common, forcePathStyle: true });
  await s3.send(new s3Sdk.CreateBucketCommand({ Bucket: "js-bucket" }));
  const put = await s3.send(new s3Sdk.PutObjectCommand({
    Bucket: "js-bucket", Key: "dir/héllo.txt", Body: "hello from js", ContentType: "text/plain",
    Metadata: { team: "ml" } }));
  out.s3_put_etag = put.ETag;
  out.s3_put_crc32 = put.ChecksumCRC32 || null;
  const got = await s3.send(new s3Sdk.GetObjectCommand({ Bucket: "js-bucket", Key: "dir/héllo.txt" }));
  out.s3_get = { body: await got.Body.transformToString(), type: got.ContentType, meta: got.Metadata };
  const ranged = await s3.send(new s3Sdk.GetObjectCommand({
    Bucket: "js-bucket", Key: "dir/héllo.txt", Range: "bytes=6-9" }));
  out.s3_range = await ranged.Body.transformToString();
  const part1 = Buffer.alloc(5 * 1024 * 1024, 7);
  const mpu = await s3.send(new s3Sdk.CreateMultipartUploadCommand({ Bucket: "js-bucket", Key: "big" }));
  const p1 = await s3.send(new s3Sdk.UploadPartCommand({
    Bucket: "js-bucket", Key: "big", UploadId: mpu.UploadId, PartNumber: 1, Body: part1 }));
  const p2 = await s3.send(new s3Sdk.UploadPartCommand({
    Bucket: "js-bucket", Key: "big", UploadId: mpu.UploadId, PartNumber: 2, Body: "tail" }));
  const done = await s3.send(new s3Sdk.CompleteMultipartUploadCommand({
    Bucket: "js-bucket", Key: "big", UploadId: mpu.UploadId,
    MultipartUpload: { Parts: [{ PartNumber: 1, ETag: p1.ETag }, { PartNumber: 2, ETag: p2.ETag }] } }));
  out.s3_multipart_etag = done.ETag;
  const head = await s3.send(new s3Sdk.HeadObjectCommand({ Bucket: "js-bucket", Key: "big" }));
  out.s3_multipart_size = head.ContentLength;
  const listed = await s3.send(new s3Sdk.ListObjectsV2Command({ Bucket: "js-bucket", Delimiter: "/" }));
  out.s3_list = { keys: (listed.Contents || []).map((o) => o.Key),
                  prefixes: (listed.CommonPrefixes || []).map((p) => p.Prefix) };
  out.s3_missing = await errorOf(s3.send(new s3Sdk.GetObjectCommand({ Bucket: "js-bucket", Key: "nope" })));
  out.s3_no_bucket = await errorOf(s3.send(new s3Sdk.ListObjectsV2Command({ Bucket: "no-such-bucket" })));

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
