// Consumable resources (AWS Batch resource-aware scheduling): named counts of
// units (licences, shared capacity) that jobs ask for with
// consumableResourceProperties, take when they start and give back when they
// end (REPLENISHABLE), or use up (NON_REPLENISHABLE). docs/jobs.md,
// "Consumable resources".
//
// This file is the pure part: the request shapes parsed, and the resources'
// documents with the AWS operations over them (ConsumableResources). What is
// in use is not kept here: the job loop derives it from the jobs that hold an
// open attempt (UnitsInUse), so it is exact after any restart, and it stores
// the documents this class changes in the same batch as the jobs' events.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "sched/snapshot.h"

namespace lote::control {

// One entry of a consumableResourceList.
struct ConsumableNeed {
  std::string resource;  // as the request gave it: a name or an ARN
  std::string name;      // the resource's name
  int64_t quantity = 0;
  friend bool operator==(const ConsumableNeed&, const ConsumableNeed&) = default;
};

// At most this many resources in one consumableResourceList (what AWS's
// console allows per job).
inline constexpr size_t kMaxConsumablesPerList = 5;

// The name a consumable resource reference gives: the name itself, or the
// part after "consumable-resource/" of an ARN; "" when malformed.
std::string ConsumableNameOf(const std::string& reference);

// ConsumableResourceProperties ({"consumableResourceList": [{consumableResource,
// quantity}]}) at `path`: null or absent list is an empty list; InvalidArgument
// naming the entry and the fix otherwise.
Result<std::vector<ConsumableNeed>> ParseConsumableProperties(const Json& properties,
                                                              const std::string& path);
// The AWS shape again (the references as given).
Json ConsumablePropertiesJson(const std::vector<ConsumableNeed>& list);

// Units per resource name in use: what the job loop counts over the jobs
// that hold an open attempt.
using UnitsInUse = std::map<std::string, int64_t>;

class ConsumableResources {
 public:
  // A document to store (or, `deleted`, to delete) with the answer.
  struct Change {
    std::string name;
    std::string arn;
    Json doc;  // null when deleted
  };

  // `arn_of(name)`: the resource's ARN ("arn:aws:batch:R:A:consumable-resource/NAME").
  explicit ConsumableResources(std::function<std::string(const std::string&)> arn_of)
      : arn_of_(std::move(arn_of)) {}

  // The stored documents (replaces what is held).
  Status Load(const std::vector<std::pair<std::string, std::string>>& name_and_doc);

  // The AWS operations: request and response shapes as in the model. Mutations
  // fill `change` with what to store before answering.
  Result<Json> Create(const Json& request, int64_t now_ms, Change* change);
  Result<Json> Describe(const Json& request, const UnitsInUse& in_use) const;
  Result<Json> Update(const Json& request, int64_t now_ms, const UnitsInUse& in_use,
                      Change* change);
  Result<Json> Delete(const Json& request, Change* change);
  Result<Json> List(const Json& request, const UnitsInUse& in_use) const;
  // The resource's name from a request's consumableResource (name or ARN):
  // NotFound (a ClientException) when there is no such resource.
  Result<std::string> Resolve(const Json& request) const;

  // A NON_REPLENISHABLE resource's units used up by an attempt that ended:
  // its total falls by `quantity` (not below 0). Nothing for a REPLENISHABLE
  // resource or one that no longer exists.
  std::optional<Change> UseUp(const std::string& name, int64_t quantity);
  // Whether the resource exists.
  bool Exists(const std::string& name) const { return docs_.count(name) > 0; }
  // Every resource as the scheduler sees it, in name order.
  std::vector<sched::Consumable> ForScheduler(const UnitsInUse& in_use) const;
  // Tags of a resource ARN (TagResource / UntagResource / ListTagsForResource);
  // NotFound when no resource has that ARN.
  Result<Json> ChangeTags(const std::string& arn, const Json& request, bool untag, Change* change);
  Result<Json> Tags(const std::string& arn) const;

 private:
  Result<std::string> NameOfArnLocked(const std::string& arn) const;
  Json Detail(const Json& doc, const UnitsInUse& in_use, bool with_tags) const;
  Change Put(const std::string& name);

  std::function<std::string(const std::string&)> arn_of_;
  std::map<std::string, Json> docs_;  // by name
};

}  // namespace lote::control
