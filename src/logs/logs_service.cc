#include "logs/logs_service.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <queue>

#include "common/crypto.h"
#include "logs/filter_pattern.h"
#include "logs/stream_names.h"

namespace lote::logs {
namespace {

constexpr int64_t kEventOverhead = 26;
constexpr int64_t kMaxBatchBytes = 1'048'576;
constexpr int64_t kMaxPutEvents = 10'000;
constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 86'400'000;
constexpr size_t kMaxResponseBytes = 1 << 20;
constexpr std::array<int32_t, 22> kRetentionDays = {1,    3,    5,    7,    14,   30,  60,  90,
                                                    120,  150,  180,  365,  400,  545, 731, 1096,
                                                    1827, 2192, 2557, 2922, 3288, 3653};

Status Invalid(std::string message) { return Status::InvalidArgument(std::move(message)); }

Status TypeError(std::string_view key, std::string_view type) {
  return Invalid("1 validation error detected: Value at '" + std::string(key) + "' must be " +
                 std::string(type));
}

Status Missing(std::string_view key) {
  return Invalid("1 validation error detected: Value null at '" + std::string(key) +
                 "' failed to satisfy constraint: Member must not be null");
}

Result<std::optional<std::string>> OptString(const Json& req, const char* key) {
  auto it = req.find(key);
  if (it == req.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return TypeError(key, "a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::string> ReqString(const Json& req, const char* key) {
  ASSIGN_OR_RETURN(std::optional<std::string> v, OptString(req, key));
  if (!v) return Missing(key);
  return *v;
}

Result<std::optional<int64_t>> OptInt(const Json& req, const char* key, int64_t min, int64_t max) {
  auto it = req.find(key);
  if (it == req.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) return TypeError(key, "an integer");
  int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return Invalid("1 validation error detected: Value '" + std::to_string(v) + "' at '" + key +
                   "' failed to satisfy constraint: Member must have value between " +
                   std::to_string(min) + " and " + std::to_string(max));
  }
  return std::optional<int64_t>(v);
}

Result<bool> OptBool(const Json& req, const char* key, bool def) {
  auto it = req.find(key);
  if (it == req.end() || it->is_null()) return def;
  if (!it->is_boolean()) return TypeError(key, "a boolean");
  return it->get<bool>();
}

Status InvalidToken() { return Invalid("The specified nextToken is invalid."); }

std::string EncodeOffsetToken(size_t offset) { return Base64Encode("o/" + std::to_string(offset)); }

Result<size_t> DecodeOffsetToken(const std::optional<std::string>& token) {
  if (!token) return size_t{0};
  std::string raw;
  if (!Base64Decode(*token, &raw) || !raw.starts_with("o/") || raw.size() < 3 || raw.size() > 22) {
    return InvalidToken();
  }
  size_t v = 0;
  for (size_t i = 2; i < raw.size(); ++i) {
    if (raw[i] < '0' || raw[i] > '9') return InvalidToken();
    v = v * 10 + static_cast<size_t>(raw[i] - '0');
  }
  return v;
}

std::string SequenceToken(char direction, uint64_t position) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%c/%020" PRIu64, direction, position);
  return buf;
}

// Parses "f/<digits>" or "b/<digits>".
bool ParseSequenceToken(std::string_view token, char* direction, uint64_t* position) {
  if (token.size() < 3 || token.size() > 24 || (token[0] != 'f' && token[0] != 'b') ||
      token[1] != '/') {
    return false;
  }
  uint64_t v = 0;
  for (size_t i = 2; i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return false;
    uint64_t d = static_cast<uint64_t>(token[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *direction = token[0];
  *position = v;
  return true;
}

// A stable event id: 15 digits from the stream name's hash + 20-digit sequence.
std::string EventId(std::string_view stream, uint64_t seq) {
  std::string h = Sha256(stream);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(h[static_cast<size_t>(i)]);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%015" PRIu64 "%020" PRIu64, v % uint64_t{1'000'000'000'000'000},
                seq);
  return buf;
}

bool ContainsCaseInsensitive(std::string_view haystack, std::string_view needle) {
  auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); };
  if (needle.empty()) return true;
  for (size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() && lower(haystack[i + k]) == lower(needle[k])) ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

Json StreamJson(const StreamInfo& s, const std::string& arn) {
  Json j = {{"logStreamName", s.name},
            {"creationTime", s.creation_ms},
            {"arn", arn},
            {"storedBytes", s.stored_bytes}};
  if (s.first_event_ms) j["firstEventTimestamp"] = *s.first_event_ms;
  if (s.last_event_ms) j["lastEventTimestamp"] = *s.last_event_ms;
  if (s.last_ingestion_ms) j["lastIngestionTime"] = *s.last_ingestion_ms;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020" PRIu64, s.next_sequence);
  j["uploadSequenceToken"] = buf;
  return j;
}

}  // namespace

LogsService::LogsService(LogStore* store, const Clock* clock, LogsServiceOptions options)
    : store_(store), clock_(clock ? clock : store->clock()), options_(std::move(options)) {}

std::string LogsService::GroupArn(std::string_view group) const {
  return "arn:aws:logs:" + options_.region + ":" + options_.account_id +
         ":log-group:" + std::string(group);
}

std::string LogsService::StreamArn(std::string_view group, std::string_view stream) const {
  return GroupArn(group) + ":log-stream:" + std::string(stream);
}

namespace {
using Handler = Result<Json> (LogsService::*)(const Json&);
const std::map<std::string, Handler, std::less<>>& Handlers() {
  static const std::map<std::string, Handler, std::less<>> handlers = {
      {"CreateLogGroup", &LogsService::CreateLogGroup},
      {"DeleteLogGroup", &LogsService::DeleteLogGroup},
      {"DescribeLogGroups", &LogsService::DescribeLogGroups},
      {"CreateLogStream", &LogsService::CreateLogStream},
      {"DeleteLogStream", &LogsService::DeleteLogStream},
      {"DescribeLogStreams", &LogsService::DescribeLogStreams},
      {"PutLogEvents", &LogsService::PutLogEvents},
      {"GetLogEvents", &LogsService::GetLogEvents},
      {"FilterLogEvents", &LogsService::FilterLogEvents},
      {"PutRetentionPolicy", &LogsService::PutRetentionPolicy},
      {"DeleteRetentionPolicy", &LogsService::DeleteRetentionPolicy},
  };
  return handlers;
}
}  // namespace

bool LogsService::Supports(std::string_view operation) { return Handlers().count(operation) > 0; }

Result<Json> LogsService::Call(std::string_view operation, const Json& request) {
  auto it = Handlers().find(operation);
  if (it == Handlers().end()) {
    return Status::Unimplemented("lote does not implement the CloudWatch Logs operation " +
                                 std::string(operation));
  }
  if (!request.is_object() && !request.is_null())
    return Invalid("the request body must be a JSON object");
  const Json& req = request.is_null() ? Json::object() : request;
  try {
    return (this->*(it->second))(req);
  } catch (const std::exception& e) {  // nlohmann type errors on odd input: never escape
    return Invalid(std::string("malformed request: ") + e.what());
  }
}

Result<std::string> LogsService::GroupFrom(const Json& req) const {
  ASSIGN_OR_RETURN(std::optional<std::string> name, OptString(req, "logGroupName"));
  ASSIGN_OR_RETURN(std::optional<std::string> ident, OptString(req, "logGroupIdentifier"));
  if (name && ident)
    return Invalid("LogGroupName and LogGroupIdentifier are mutually exclusive parameters.");
  if (!name && !ident)
    return Invalid("Either LogGroupName or LogGroupIdentifier must be specified.");
  std::string group = name ? *name : *ident;
  if (ident && ident->starts_with("arn:")) {
    // arn:<partition>:logs:<region>:<account>:log-group:<name>[:*]
    size_t pos = ident->find(":log-group:");
    if (pos == std::string::npos) return Invalid("Invalid logGroupIdentifier: " + *ident);
    group = ident->substr(pos + 11);
    if (group.ends_with(":*")) group.resize(group.size() - 2);
  }
  RETURN_IF_ERROR(ValidateLogGroupName(group, name ? "logGroupName" : "logGroupIdentifier"));
  return group;
}

Result<Json> LogsService::CreateLogGroup(const Json& req) {
  ASSIGN_OR_RETURN(std::string name, ReqString(req, "logGroupName"));
  RETURN_IF_ERROR(ValidateLogGroupName(name));
  if (name.starts_with("aws/"))
    return Invalid("Log group names can't start with the string aws/: " + name);
  ASSIGN_OR_RETURN(std::optional<std::string> cls, OptString(req, "logGroupClass"));
  if (cls && *cls != "STANDARD" && *cls != "INFREQUENT_ACCESS" && *cls != "DELIVERY") {
    return Invalid("Invalid logGroupClass: " + *cls);
  }
  if (store_->GroupCount() >= options_.max_log_groups) {
    return Status::ResourceExhausted("Resource limit exceeded: at most " +
                                     std::to_string(options_.max_log_groups) + " log groups");
  }
  RETURN_IF_ERROR(store_->CreateGroup(name));
  return Json::object();
}

Result<Json> LogsService::DeleteLogGroup(const Json& req) {
  ASSIGN_OR_RETURN(std::string name, ReqString(req, "logGroupName"));
  RETURN_IF_ERROR(ValidateLogGroupName(name));
  RETURN_IF_ERROR(store_->DeleteGroup(name));
  return Json::object();
}

Result<Json> LogsService::DescribeLogGroups(const Json& req) {
  ASSIGN_OR_RETURN(std::optional<std::string> prefix, OptString(req, "logGroupNamePrefix"));
  ASSIGN_OR_RETURN(std::optional<std::string> pattern, OptString(req, "logGroupNamePattern"));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(req, "nextToken"));
  ASSIGN_OR_RETURN(std::optional<int64_t> limit, OptInt(req, "limit", 1, 50));
  if (prefix && pattern) {
    return Invalid("LogGroupNamePrefix and LogGroupNamePattern are mutually exclusive parameters.");
  }
  if (prefix) RETURN_IF_ERROR(ValidateLogGroupName(*prefix, "logGroupNamePrefix"));
  std::vector<std::string> identifiers;
  if (auto it = req.find("logGroupIdentifiers"); it != req.end() && !it->is_null()) {
    if (!it->is_array()) return TypeError("logGroupIdentifiers", "a list");
    for (const Json& v : *it) {
      if (!v.is_string()) return TypeError("logGroupIdentifiers", "a list of strings");
      Json one = {{"logGroupIdentifier", v}};
      ASSIGN_OR_RETURN(std::string g, GroupFrom(one));
      identifiers.push_back(g);
    }
  }
  ASSIGN_OR_RETURN(size_t offset, DecodeOffsetToken(token));
  std::vector<GroupInfo> groups = store_->ListGroups();
  std::vector<GroupInfo> matched;
  for (GroupInfo& g : groups) {
    if (prefix && !g.name.starts_with(*prefix)) continue;
    if (pattern && !ContainsCaseInsensitive(g.name, *pattern)) continue;
    if (!identifiers.empty() &&
        std::find(identifiers.begin(), identifiers.end(), g.name) == identifiers.end()) {
      continue;
    }
    matched.push_back(std::move(g));
  }
  size_t n = static_cast<size_t>(limit.value_or(50));
  Json out = {{"logGroups", Json::array()}};
  for (size_t i = offset; i < matched.size() && i < offset + n; ++i) {
    const GroupInfo& g = matched[i];
    Json j = {{"logGroupName", g.name},          {"creationTime", g.creation_ms},
              {"metricFilterCount", 0},          {"arn", GroupArn(g.name) + ":*"},
              {"logGroupArn", GroupArn(g.name)}, {"storedBytes", g.stored_bytes},
              {"logGroupClass", "STANDARD"}};
    if (g.retention_days) j["retentionInDays"] = *g.retention_days;
    out["logGroups"].push_back(std::move(j));
  }
  if (offset + n < matched.size()) out["nextToken"] = EncodeOffsetToken(offset + n);
  return out;
}

Result<Json> LogsService::CreateLogStream(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, ReqString(req, "logGroupName"));
  ASSIGN_OR_RETURN(std::string name, ReqString(req, "logStreamName"));
  RETURN_IF_ERROR(ValidateLogGroupName(group));
  RETURN_IF_ERROR(ValidateLogStreamName(name));
  RETURN_IF_ERROR(store_->CreateStream(group, name));
  return Json::object();
}

Result<Json> LogsService::DeleteLogStream(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, ReqString(req, "logGroupName"));
  ASSIGN_OR_RETURN(std::string name, ReqString(req, "logStreamName"));
  RETURN_IF_ERROR(ValidateLogGroupName(group));
  RETURN_IF_ERROR(ValidateLogStreamName(name));
  RETURN_IF_ERROR(store_->DeleteStream(group, name));
  return Json::object();
}

Result<Json> LogsService::DescribeLogStreams(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, GroupFrom(req));
  ASSIGN_OR_RETURN(std::optional<std::string> prefix, OptString(req, "logStreamNamePrefix"));
  ASSIGN_OR_RETURN(std::optional<std::string> order, OptString(req, "orderBy"));
  ASSIGN_OR_RETURN(bool descending, OptBool(req, "descending", false));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(req, "nextToken"));
  ASSIGN_OR_RETURN(std::optional<int64_t> limit, OptInt(req, "limit", 1, 50));
  bool by_time = false;
  if (order) {
    if (*order == "LastEventTime") {
      by_time = true;
    } else if (*order != "LogStreamName") {
      return Invalid(
          "1 validation error detected: Value '" + *order +
          "' at 'orderBy' failed to satisfy constraint: Member must satisfy enum value set: "
          "[LogStreamName, LastEventTime]");
    }
  }
  if (by_time && prefix)
    return Invalid("Cannot order by LastEventTime with a logStreamNamePrefix.");
  if (prefix) RETURN_IF_ERROR(ValidateLogStreamName(*prefix, "logStreamNamePrefix"));
  ASSIGN_OR_RETURN(size_t offset, DecodeOffsetToken(token));
  ASSIGN_OR_RETURN(std::vector<StreamInfo> streams, store_->ListStreams(group));
  if (prefix) {
    std::erase_if(streams, [&](const StreamInfo& s) { return !s.name.starts_with(*prefix); });
  }
  if (by_time) {
    std::stable_sort(streams.begin(), streams.end(), [](const StreamInfo& a, const StreamInfo& b) {
      return a.last_event_ms.value_or(0) < b.last_event_ms.value_or(0);
    });
  }
  if (descending) std::reverse(streams.begin(), streams.end());
  size_t n = static_cast<size_t>(limit.value_or(50));
  Json out = {{"logStreams", Json::array()}};
  for (size_t i = offset; i < streams.size() && i < offset + n; ++i) {
    out["logStreams"].push_back(StreamJson(streams[i], StreamArn(group, streams[i].name)));
  }
  if (offset + n < streams.size()) out["nextToken"] = EncodeOffsetToken(offset + n);
  return out;
}

Result<Json> LogsService::PutLogEvents(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, ReqString(req, "logGroupName"));
  ASSIGN_OR_RETURN(std::string stream, ReqString(req, "logStreamName"));
  RETURN_IF_ERROR(ValidateLogGroupName(group));
  RETURN_IF_ERROR(ValidateLogStreamName(stream));
  ASSIGN_OR_RETURN(std::optional<std::string> seq_token, OptString(req, "sequenceToken"));
  (void)seq_token;  // accepted and ignored, as AWS does now
  auto it = req.find("logEvents");
  if (it == req.end() || it->is_null()) return Missing("logEvents");
  if (!it->is_array()) return TypeError("logEvents", "a list");
  const Json& list = *it;
  if (list.empty() || static_cast<int64_t>(list.size()) > kMaxPutEvents) {
    return Invalid(
        "1 validation error detected: Value at 'logEvents' failed to satisfy constraint: Member "
        "must "
        "have length between 1 and 10000");
  }
  std::vector<int64_t> ts;
  std::vector<const std::string*> msgs;
  int64_t batch_bytes = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& e = list[i];
    std::string where = "logEvents." + std::to_string(i + 1);
    if (!e.is_object()) return TypeError(where, "an object");
    auto t = e.find("timestamp");
    auto m = e.find("message");
    if (t == e.end() || t->is_null()) return Missing(where + ".member.timestamp");
    if (m == e.end() || m->is_null()) return Missing(where + ".member.message");
    if (!t->is_number_integer() || t->get<int64_t>() < 0)
      return TypeError(where + ".member.timestamp", "a non-negative integer");
    if (!m->is_string()) return TypeError(where + ".member.message", "a string");
    const std::string& msg = m->get_ref<const std::string&>();
    if (msg.empty()) {
      return Invalid(
          "1 validation error detected: Value '' at '" + where +
          ".member.message' failed to satisfy constraint: Member must have length greater than or "
          "equal to 1");
    }
    ts.push_back(t->get<int64_t>());
    msgs.push_back(&msg);
    batch_bytes += static_cast<int64_t>(msg.size()) + kEventOverhead;
  }
  if (batch_bytes > kMaxBatchBytes) {
    return Invalid("Upload too large: the batch is " + std::to_string(batch_bytes) +
                   " bytes (messages plus 26 bytes per event); the maximum is 1048576. Send fewer "
                   "events per call.");
  }
  for (size_t i = 1; i < ts.size(); ++i) {
    if (ts[i] < ts[i - 1]) {
      return Invalid("Log events in a single PutLogEvents request must be in chronological order.");
    }
  }
  ASSIGN_OR_RETURN(GroupInfo ginfo, store_->GetGroup(group));
  ASSIGN_OR_RETURN(StreamInfo sinfo, store_->GetStream(group, stream));
  (void)sinfo;
  const int64_t now = clock_->NowMillis();
  size_t n = ts.size();
  size_t too_new = n, too_old_end = 0, expired_end = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ts[i] > now + 2 * kHour) {
      too_new = i;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (ts[i] < now - 14 * kDay) too_old_end = i + 1;
    if (ginfo.retention_days && ts[i] < now - int64_t{*ginfo.retention_days} * kDay)
      expired_end = i + 1;
  }
  size_t first = std::max(too_old_end, expired_end);
  if (first < too_new && ts[too_new - 1] - ts[first] > 24 * kHour) {
    return Invalid(
        "The batch of log events in a single PutLogEvents request cannot span more than 24 hours.");
  }
  std::vector<InputEvent> events;
  for (size_t i = first; i < too_new; ++i) events.push_back(InputEvent{ts[i], *msgs[i], -1});
  uint64_t next = 0;
  if (!events.empty()) {
    AppendOptions ao;
    ao.sync = true;  // acknowledged PutLogEvents survive a machine crash
    ASSIGN_OR_RETURN(AppendResult r, store_->Append(group, stream, events, ao));
    next = r.first_sequence + r.count;
  } else {
    ASSIGN_OR_RETURN(StreamInfo now_info, store_->GetStream(group, stream));
    next = now_info.next_sequence;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020" PRIu64, next);
  Json out = {{"nextSequenceToken", buf}};
  if (too_new < n || too_old_end > 0 || expired_end > 0) {
    Json info = Json::object();
    if (too_new < n) info["tooNewLogEventStartIndex"] = too_new;
    if (too_old_end > 0) info["tooOldLogEventEndIndex"] = too_old_end;
    if (expired_end > 0) info["expiredLogEventEndIndex"] = expired_end;
    out["rejectedLogEventsInfo"] = info;
  }
  return out;
}

Result<Json> LogsService::GetLogEvents(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, GroupFrom(req));
  ASSIGN_OR_RETURN(std::string stream, ReqString(req, "logStreamName"));
  RETURN_IF_ERROR(ValidateLogStreamName(stream));
  ASSIGN_OR_RETURN(std::optional<int64_t> start, OptInt(req, "startTime", 0, INT64_MAX));
  ASSIGN_OR_RETURN(std::optional<int64_t> end, OptInt(req, "endTime", 0, INT64_MAX));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(req, "nextToken"));
  ASSIGN_OR_RETURN(std::optional<int64_t> limit, OptInt(req, "limit", 1, 10000));
  ASSIGN_OR_RETURN(bool from_head, OptBool(req, "startFromHead", false));

  ReadRequest rr;
  rr.start_time_ms = start;
  rr.end_time_ms = end;
  rr.limit = static_cast<size_t>(limit.value_or(10000));
  rr.max_bytes = kMaxResponseBytes;
  char dir = from_head ? 'f' : 'b';
  bool tail = false;
  if (token) {
    if (!ParseSequenceToken(*token, &dir, &rr.position)) return InvalidToken();
  } else if (from_head) {
    rr.position = 0;
  } else {
    rr.position = UINT64_MAX;  // the latest events
    tail = true;
  }
  rr.direction = dir == 'f' ? Direction::kForward : Direction::kBackward;
  ASSIGN_OR_RETURN(ReadResult r, store_->Read(group, stream, rr));

  Json events = Json::array();
  for (const LogEvent& e : r.events) {
    events.push_back(
        {{"timestamp", e.timestamp_ms}, {"message", e.message}, {"ingestionTime", e.ingestion_ms}});
  }
  std::string fwd, back;
  if (rr.direction == Direction::kForward) {
    fwd = (token && r.next_position == rr.position) ? *token : SequenceToken('f', r.next_position);
    back = SequenceToken('b', r.events.empty() ? rr.position : r.events.front().sequence);
  } else {
    uint64_t from = tail ? r.stream_next_sequence : std::min(rr.position, r.stream_next_sequence);
    back = (token && r.next_position == from) ? *token : SequenceToken('b', r.next_position);
    fwd = SequenceToken('f', r.events.empty() ? from : r.events.back().sequence + 1);
  }
  return Json{
      {"events", std::move(events)}, {"nextForwardToken", fwd}, {"nextBackwardToken", back}};
}

namespace {

// A position in FilterLogEvents' merged order: (timestamp, stream, sequence).
struct MergeKey {
  int64_t ts = 0;
  std::string stream;
  uint64_t seq = 0;
  bool operator<(const MergeKey& o) const {
    if (ts != o.ts) return ts < o.ts;
    if (stream != o.stream) return stream < o.stream;
    return seq < o.seq;
  }
};

std::string EncodeFilterToken(const MergeKey& k) {
  Json j = {{"t", k.ts}, {"s", k.stream}, {"q", k.seq}};
  return Base64Encode(j.dump());
}

Result<std::optional<MergeKey>> DecodeFilterToken(const std::optional<std::string>& token) {
  if (!token) return std::optional<MergeKey>();
  std::string raw;
  if (!Base64Decode(*token, &raw)) return InvalidToken();
  Result<Json> j = ParseJson(raw);
  if (!j.ok() || !j->is_object() || !(*j)["t"].is_number_integer() || !(*j)["s"].is_string() ||
      !(*j)["q"].is_number_unsigned()) {
    return InvalidToken();
  }
  return std::optional<MergeKey>(
      MergeKey{(*j)["t"].get<int64_t>(), (*j)["s"].get<std::string>(), (*j)["q"].get<uint64_t>()});
}

struct Cursor {
  std::string stream;
  uint64_t position = 0;
  std::vector<LogEvent> buffer;
  size_t next = 0;
  bool exhausted = false;  // nothing more to read in the time range
};

}  // namespace

Result<Json> LogsService::FilterLogEvents(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, GroupFrom(req));
  ASSIGN_OR_RETURN(std::optional<std::string> prefix, OptString(req, "logStreamNamePrefix"));
  ASSIGN_OR_RETURN(std::optional<int64_t> start, OptInt(req, "startTime", 0, INT64_MAX));
  ASSIGN_OR_RETURN(std::optional<int64_t> end, OptInt(req, "endTime", 0, INT64_MAX - 1));
  ASSIGN_OR_RETURN(std::optional<std::string> pattern_text, OptString(req, "filterPattern"));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(req, "nextToken"));
  ASSIGN_OR_RETURN(std::optional<int64_t> limit, OptInt(req, "limit", 1, 10000));
  std::vector<std::string> names;
  bool have_names = false;
  if (auto it = req.find("logStreamNames"); it != req.end() && !it->is_null()) {
    if (!it->is_array()) return TypeError("logStreamNames", "a list");
    if (it->empty() || it->size() > 100) {
      return Invalid(
          "1 validation error detected: Value at 'logStreamNames' failed to satisfy constraint: "
          "Member must have length between 1 and 100");
    }
    for (const Json& v : *it) {
      if (!v.is_string()) return TypeError("logStreamNames", "a list of strings");
      RETURN_IF_ERROR(ValidateLogStreamName(v.get<std::string>(), "logStreamNames"));
      names.push_back(v.get<std::string>());
    }
    have_names = true;
  }
  if (have_names && prefix) {
    return Invalid("logStreamNames and logStreamNamePrefix are mutually exclusive parameters.");
  }
  if (pattern_text && pattern_text->size() > 1024)
    return Invalid("filterPattern is longer than 1024 characters");
  ASSIGN_OR_RETURN(FilterPattern pattern, FilterPattern::Parse(pattern_text.value_or("")));
  ASSIGN_OR_RETURN(std::optional<MergeKey> after, DecodeFilterToken(token));

  std::vector<Cursor> cursors;
  if (have_names) {
    // Only the named streams are looked up (the console names a job's nodes in
    // a group that may hold a million streams); a name with no stream is skipped.
    RETURN_IF_ERROR(store_->GetGroup(group).status());
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const std::string& name : names) {
      Result<StreamInfo> s = store_->GetStream(group, name);
      if (s.ok()) {
        cursors.push_back(Cursor{name, 0, {}, 0, false});
      } else if (!s.status().IsNotFound()) {
        return s.status();
      }
    }
  } else {
    ASSIGN_OR_RETURN(std::vector<StreamInfo> all, store_->ListStreams(group));
    for (const StreamInfo& s : all) {  // sorted by name
      if (prefix && !s.name.starts_with(*prefix)) continue;
      cursors.push_back(Cursor{s.name, 0, {}, 0, false});
    }
  }

  std::optional<int64_t> read_start = start;
  if (after) read_start = std::max(start.value_or(0), after->ts);
  std::optional<int64_t> read_end;
  if (end) read_end = *end + 1;  // FilterLogEvents' endTime is inclusive
  constexpr size_t kChunk = 1000;
  constexpr uint64_t kMaxScanned = 2'000'000;  // events examined per call

  // Ensures the cursor has a buffered event (or is exhausted).
  auto fill = [&](Cursor& c) -> Status {
    while (c.next >= c.buffer.size() && !c.exhausted) {
      ReadRequest rr;
      rr.direction = Direction::kForward;
      rr.position = c.position;
      rr.start_time_ms = read_start;
      rr.end_time_ms = read_end;
      rr.limit = kChunk;
      rr.max_bytes = SIZE_MAX;
      Result<ReadResult> r = store_->Read(group, c.stream, rr);
      if (!r.ok()) {
        if (r.status().IsNotFound()) {  // deleted meanwhile
          c.exhausted = true;
          break;
        }
        return r.status();
      }
      c.buffer = std::move(r->events);
      c.next = 0;
      c.position = r->next_position;
      if (r->exhausted) c.exhausted = true;
      if (after) {
        while (c.next < c.buffer.size() &&
               !(*after <
                 MergeKey{c.buffer[c.next].timestamp_ms, c.stream, c.buffer[c.next].sequence})) {
          ++c.next;
        }
      }
    }
    return Status::Ok();
  };

  auto greater = [&](size_t a, size_t b) {
    const LogEvent& ea = cursors[a].buffer[cursors[a].next];
    const LogEvent& eb = cursors[b].buffer[cursors[b].next];
    if (ea.timestamp_ms != eb.timestamp_ms) return ea.timestamp_ms > eb.timestamp_ms;
    return a > b;  // cursors are in stream-name order
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(greater)> heap(greater);
  for (size_t i = 0; i < cursors.size(); ++i) {
    RETURN_IF_ERROR(fill(cursors[i]));
    if (cursors[i].next < cursors[i].buffer.size()) heap.push(i);
  }

  size_t max_events = static_cast<size_t>(limit.value_or(10000));
  Json events = Json::array();
  size_t bytes = 0;
  uint64_t scanned = 0;
  std::optional<MergeKey> last;
  bool more = false;
  while (!heap.empty()) {
    size_t i = heap.top();
    Cursor& c = cursors[i];
    const LogEvent& e = c.buffer[c.next];
    bool match = pattern.Matches(e.message);
    if (match &&
        (events.size() >= max_events ||
         (!events.empty() && bytes + e.message.size() + kEventOverhead > kMaxResponseBytes))) {
      more = true;
      break;
    }
    if (scanned >= kMaxScanned) {
      more = true;
      break;
    }
    heap.pop();
    ++scanned;
    last = MergeKey{e.timestamp_ms, c.stream, e.sequence};
    if (match) {
      bytes += e.message.size() + kEventOverhead;
      events.push_back({{"logStreamName", c.stream},
                        {"timestamp", e.timestamp_ms},
                        {"message", e.message},
                        {"ingestionTime", e.ingestion_ms},
                        {"eventId", EventId(c.stream, e.sequence)}});
    }
    ++c.next;
    RETURN_IF_ERROR(fill(c));
    if (c.next < c.buffer.size()) heap.push(i);
  }
  Json searched = Json::array();
  for (const Cursor& c : cursors) {
    bool complete = c.exhausted && c.next >= c.buffer.size();
    searched.push_back({{"logStreamName", c.stream}, {"searchedCompletely", complete}});
  }
  Json out = {{"events", std::move(events)}, {"searchedLogStreams", std::move(searched)}};
  if (more && last) out["nextToken"] = EncodeFilterToken(*last);
  return out;
}

Result<Json> LogsService::PutRetentionPolicy(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, ReqString(req, "logGroupName"));
  RETURN_IF_ERROR(ValidateLogGroupName(group));
  auto it = req.find("retentionInDays");
  if (it == req.end() || it->is_null()) return Missing("retentionInDays");
  if (!it->is_number_integer()) return TypeError("retentionInDays", "an integer");
  int64_t days = it->get<int64_t>();
  if (std::find(kRetentionDays.begin(), kRetentionDays.end(), days) == kRetentionDays.end()) {
    return Invalid(
        "1 validation error detected: Value '" + std::to_string(days) +
        "' at 'retentionInDays' failed to satisfy constraint: Member must satisfy enum value set: "
        "[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, "
        "2922, 3288, 3653]");
  }
  RETURN_IF_ERROR(store_->SetRetention(group, static_cast<int32_t>(days)));
  return Json::object();
}

Result<Json> LogsService::DeleteRetentionPolicy(const Json& req) {
  ASSIGN_OR_RETURN(std::string group, ReqString(req, "logGroupName"));
  RETURN_IF_ERROR(ValidateLogGroupName(group));
  RETURN_IF_ERROR(store_->SetRetention(group, std::nullopt));
  return Json::object();
}

}  // namespace lote::logs
