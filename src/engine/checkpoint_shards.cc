#include "engine/checkpoint_shards.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/json.h"
#include "engine/communicator.h"

namespace lote::engine {
namespace {

struct ShardEntry {
  std::vector<int64_t> global_shape;
  int split_dim = -1;
  int64_t split_begin = 0;
};

Result<std::map<std::string, ShardEntry>> ParseLoteShards(const SafetensorsReader& reader,
                                                          const std::string& name) {
  auto it = reader.metadata().find("lote_shards");
  if (it == reader.metadata().end()) {
    return Status::DataLoss(
        fmt::format("{} has no \"lote_shards\" metadata; it is not a lote checkpoint shard", name));
  }
  auto parsed = ParseJson(it->second);
  if (!parsed.ok() || !parsed->is_object()) {
    return Status::DataLoss(fmt::format("{}: \"lote_shards\" is not a JSON object", name));
  }
  std::map<std::string, ShardEntry> out;
  for (const auto& [tensor, e] : parsed->items()) {
    auto bad = [&](const char* why) {
      return Status::DataLoss(fmt::format("{}: lote_shards[\"{}\"]: {}", name, tensor, why));
    };
    if (!e.is_object() || !e.contains("global_shape") || !e["global_shape"].is_array() ||
        !e.contains("split_dim") || !e["split_dim"].is_number_integer()) {
      return bad("needs global_shape and split_dim");
    }
    ShardEntry s;
    for (const auto& d : e["global_shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return bad("bad global_shape");
      s.global_shape.push_back(d.get<int64_t>());
    }
    s.split_dim = e["split_dim"].get<int>();
    s.split_begin = e.contains("split_begin") && e["split_begin"].is_number_integer()
                        ? e["split_begin"].get<int64_t>()
                        : 0;
    if (s.split_dim < -1 || s.split_dim > 1 ||
        s.split_dim >= static_cast<int>(s.global_shape.size()) || s.split_begin < 0) {
      return bad("split_dim must be -1, 0 or 1 (below the rank) and split_begin >= 0");
    }
    out[tensor] = std::move(s);
  }
  return out;
}

// The header's tp_rank and tp_size, if present, agree with the file's place.
Status CheckRankMetadata(const SafetensorsReader& reader, const std::string& file, int r, int tp) {
  const auto& md = reader.metadata();
  if (md.count("tp_size") != 0 && md.at("tp_size") != std::to_string(tp)) {
    return Status::DataLoss(fmt::format(
        "{} says tp_size {}, but the checkpoint has {} model shards", file, md.at("tp_size"), tp));
  }
  if (md.count("tp_rank") != 0 && md.at("tp_rank") != std::to_string(r)) {
    return Status::DataLoss(fmt::format("{} says tp_rank {}", file, md.at("tp_rank")));
  }
  return Status::Ok();
}

// The spec of one shard as its file describes it, checked against the whole tensor.
Result<TensorSpec> ShardSpec(const std::string& file, const std::string& name,
                             const TensorInfo& info, const ShardEntry& se,
                             const TensorSpec* whole) {
  if (whole == nullptr) {
    return Status::InvalidArgument(fmt::format(
        "{} has tensor \"{}\", which the manifest's model config does not have", file, name));
  }
  if (se.global_shape != whole->global_shape) {
    return Status::InvalidArgument(fmt::format(
        "{}: tensor \"{}\" has global shape [{}] but the manifest's config needs [{}]", file, name,
        fmt::join(se.global_shape, ", "), fmt::join(whole->global_shape, ", ")));
  }
  // The shard's shape equals the global one but along split_dim.
  bool shape_ok = info.shape.size() == se.global_shape.size();
  for (size_t d = 0; shape_ok && d < info.shape.size(); ++d) {
    shape_ok = static_cast<int>(d) == se.split_dim
                   ? se.split_begin + info.shape[d] <= se.global_shape[d]
                   : info.shape[d] == se.global_shape[d];
  }
  if (!shape_ok) {
    return Status::DataLoss(fmt::format(
        "{}: tensor \"{}\" of shape [{}] does not fit global shape [{}] at split_dim {}, "
        "split_begin {}",
        file, name, fmt::join(info.shape, ", "), fmt::join(se.global_shape, ", "), se.split_dim,
        se.split_begin));
  }
  TensorSpec spec;
  spec.name = name;
  spec.shape = info.shape;
  spec.global_shape = se.global_shape;
  spec.split_dim = se.split_dim;
  spec.split_begin = se.split_begin;
  spec.numel = info.numel();
  return spec;
}

// The pieces of one tensor: all replicated, or all split along one dimension and
// tiling it exactly.
Status CheckTiling(const TensorSpec& whole, const std::vector<TensorSpec>& pieces,
                   const std::vector<std::string>& files) {
  for (size_t i = 1; i < pieces.size(); ++i) {
    if (pieces[i].split_dim != pieces[0].split_dim) {
      return Status::DataLoss(fmt::format("tensor \"{}\" is split along dim {} in {} but {} in {}",
                                          whole.name, pieces[0].split_dim, files[0],
                                          pieces[i].split_dim, files[i]));
    }
  }
  const int dim = pieces[0].split_dim;
  if (dim < 0) return Status::Ok();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const TensorSpec& p : pieces) {
    ranges.emplace_back(p.split_begin, p.split_begin + p.shape[static_cast<size_t>(dim)]);
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t next = 0;
  for (const auto& [b, e] : ranges) {
    if (b != next) {
      return Status::DataLoss(
          fmt::format("the shards of tensor \"{}\" do not tile it along dim {}: {} at {}",
                      whole.name, dim, b < next ? "overlap" : "gap", std::min(b, next)));
    }
    next = e;
  }
  if (next != whole.global_shape[static_cast<size_t>(dim)]) {
    return Status::DataLoss(
        fmt::format("the shards of tensor \"{}\" cover {} of its {} along dim {}", whole.name, next,
                    whole.global_shape[static_cast<size_t>(dim)], dim));
  }
  return Status::Ok();
}

Status WithFile(const Status& s, const std::string& file) {
  if (s.ok()) return s;
  return Status(s.code(), fmt::format("{}: {}", file, s.message()));
}

// Elements [begin, begin + count) of a tensor into out, a chunk at a time, each
// chunk's mapped pages dropped once copied: the mapping never holds more than a chunk.
Status ReadEvicting(const SafetensorsReader& reader, const std::string& file,
                    const std::string& name, int64_t begin, int64_t count, float* out) {
  constexpr int64_t kChunk = int64_t{1} << 22;  // 16 MiB of F32
  for (int64_t at = 0; at < count; at += kChunk) {
    const int64_t n = std::min(kChunk, count - at);
    RETURN_IF_ERROR(WithFile(reader.ReadFloatRange(name, begin + at, n, out + at), file));
    reader.Evict(name, begin + at, n);
  }
  return Status::Ok();
}

// Rows [begin, end) of a tensor seen as [global_shape[0], the rest], and that row's
// length, for a shard holding whole rows (split_dim -1 or 0).
struct Rows {
  int64_t begin, end, width;
};

Rows RowsOf(const TensorSpec& spec) {
  Rows r{0, spec.global_shape.empty() ? 1 : spec.global_shape[0], 1};
  for (size_t d = 1; d < spec.global_shape.size(); ++d) r.width *= spec.global_shape[d];
  if (spec.split_dim == 0) r = {spec.split_begin, spec.split_begin + spec.shape[0], r.width};
  return r;
}

}  // namespace

Result<ModelShards> ModelShards::Open(const LlamaConfig& config,
                                      std::vector<const SafetensorsReader*> readers,
                                      std::vector<std::string> names) {
  ModelShards m;
  m.readers_ = std::move(readers);
  m.names_ = std::move(names);
  const ParamLayout whole(config);
  const int tp = static_cast<int>(m.readers_.size());
  for (int r = 0; r < tp; ++r) {
    const SafetensorsReader& reader = *m.readers_[static_cast<size_t>(r)];
    const std::string& file = m.names_[static_cast<size_t>(r)];
    RETURN_IF_ERROR(CheckRankMetadata(reader, file, r, tp));
    ASSIGN_OR_RETURN(auto entries, ParseLoteShards(reader, file));
    for (const auto& [name, info] : reader.tensors()) {
      auto e = entries.find(name);
      if (e == entries.end()) {
        return Status::DataLoss(
            fmt::format("{}: tensor \"{}\" has no entry in lote_shards", file, name));
      }
      ASSIGN_OR_RETURN(TensorSpec spec, ShardSpec(file, name, info, e->second, whole.Find(name)));
      m.pieces_[name].push_back({r, std::move(spec)});
    }
    for (const auto& [name, se] : entries) {
      if (reader.Find(name) == nullptr) {
        return Status::DataLoss(fmt::format(
            "{}: lote_shards lists \"{}\" but the file has no such tensor", file, name));
      }
    }
  }
  for (const TensorSpec& spec : whole.tensors()) {
    auto it = m.pieces_.find(spec.name);
    if (it == m.pieces_.end()) {
      return Status::NotFound(fmt::format(
          "no model shard has tensor \"{}\", which the manifest's config needs", spec.name));
    }
    std::vector<TensorSpec> specs;
    std::vector<std::string> files;
    for (const Piece& p : it->second) {
      specs.push_back(p.spec);
      files.push_back(m.names_[static_cast<size_t>(p.rank)]);
    }
    RETURN_IF_ERROR(CheckTiling(spec, specs, files));
  }
  return m;
}

Status ModelShards::ReadPiece(const Piece& p) {
  buf_.resize(static_cast<size_t>(p.spec.numel));
  return ReadEvicting(*readers_[static_cast<size_t>(p.rank)], names_[static_cast<size_t>(p.rank)],
                      p.spec.name, 0, p.spec.numel, buf_.data());
}

// When the piece and dst both hold whole rows, their common rows are one contiguous
// run in each: read straight into dst, no buffer.
Status ModelShards::ReadRows(const Piece& p, const TensorSpec& dst, float* out) {
  const Rows src = RowsOf(p.spec), want = RowsOf(dst);
  const int64_t lo = std::max(src.begin, want.begin), hi = std::min(src.end, want.end);
  return ReadEvicting(*readers_[static_cast<size_t>(p.rank)], names_[static_cast<size_t>(p.rank)],
                      p.spec.name, (lo - src.begin) * src.width, (hi - lo) * src.width,
                      out + (lo - want.begin) * want.width);
}

Status ModelShards::Read(const TensorSpec& dst, float* out, bool check_replicas) {
  auto it = pieces_.find(dst.name);
  if (it == pieces_.end()) {
    return Status::NotFound(fmt::format("no model shard has tensor \"{}\"", dst.name));
  }
  const std::vector<Piece>& pieces = it->second;
  if (pieces.front().spec.replicated()) {
    if (!check_replicas) {
      RETURN_IF_ERROR(ReadPiece(pieces.back()));
      CopyOverlap(pieces.back().spec, buf_.data(), dst, out);
      return Status::Ok();
    }
    RETURN_IF_ERROR(ReadPiece(pieces.front()));
    first_replica_.assign(buf_.begin(), buf_.end());  // a copy: buf_ keeps its capacity
    for (size_t i = 1; i < pieces.size(); ++i) {
      RETURN_IF_ERROR(ReadPiece(pieces[i]));
      if (std::memcmp(buf_.data(), first_replica_.data(), sizeof(float) * buf_.size()) != 0) {
        return Status::DataLoss(
            fmt::format("tensor \"{}\" is replicated but differs between {} and {}", dst.name,
                        names_[static_cast<size_t>(pieces.front().rank)],
                        names_[static_cast<size_t>(pieces[i].rank)]));
      }
    }
    CopyOverlap(pieces.front().spec, first_replica_.data(), dst, out);
    return Status::Ok();
  }
  for (const Piece& p : pieces) {
    if (!Overlaps(p.spec, dst)) continue;
    if (p.spec.split_dim != 1 && dst.split_dim != 1) {
      RETURN_IF_ERROR(ReadRows(p, dst, out));
      continue;
    }
    RETURN_IF_ERROR(ReadPiece(p));
    CopyOverlap(p.spec, buf_.data(), dst, out);
  }
  return Status::Ok();
}

Result<OptimShards> OptimShards::Open(const LlamaConfig& config, int tp, int dp,
                                      std::vector<const SafetensorsReader*> readers,
                                      std::vector<std::string> names) {
  OptimShards o;
  o.tp_ = tp;
  o.dp_ = dp;
  o.readers_ = std::move(readers);
  o.names_ = std::move(names);
  if (o.readers_.size() != static_cast<size_t>(tp) * static_cast<size_t>(dp)) {
    return Status::Internal(
        fmt::format("{} optimizer shards for a {}x{} layout", o.readers_.size(), tp, dp));
  }
  for (int r = 0; r < tp; ++r) {
    o.layouts_.emplace_back(config, TensorParallel{r, tp});
    for (int d = 0; d < dp; ++d) {
      const size_t i = static_cast<size_t>(r * dp + d);
      const int64_t want = EvenSplit(o.layouts_.back().total(), dp, d).size();
      for (const char* moment : {"exp_avg", "exp_avg_sq"}) {
        const TensorInfo* t = o.readers_[i]->Find(moment);
        if (t == nullptr || t->numel() != want) {
          return Status::DataLoss(
              fmt::format("{}: {} must have {} elements (this rank's share "
                          "of TP rank {}'s {} parameters), it has {}",
                          o.names_[i], moment, want, r, o.layouts_.back().total(),
                          t == nullptr ? 0 : t->numel()));
        }
      }
    }
  }
  return o;
}

Status OptimShards::Read(const TensorSpec& dst, const std::string& moment, float* out) {
  for (int r = 0; r < tp_; ++r) {
    const ParamLayout& layout = layouts_[static_cast<size_t>(r)];
    const TensorSpec* src = layout.Find(dst.name);
    if (src == nullptr) {
      return Status::NotFound(fmt::format("TP rank {} has no tensor \"{}\"", r, dst.name));
    }
    if (!Overlaps(*src, dst)) continue;
    // The source shard is [offset, offset + numel) of rank r's flat buffer, which the
    // DP ranks' files cut into even ranges.
    buf_.resize(static_cast<size_t>(src->numel));
    for (int d = 0; d < dp_; ++d) {
      const Range file = EvenSplit(layout.total(), dp_, d);
      const int64_t lo = std::max(file.begin, src->offset);
      const int64_t hi = std::min(file.end, src->offset + src->numel);
      if (lo >= hi) continue;
      const size_t i = static_cast<size_t>(r * dp_ + d);
      RETURN_IF_ERROR(ReadEvicting(*readers_[i], names_[i], moment, lo - file.begin, hi - lo,
                                   buf_.data() + lo - src->offset));
    }
    CopyOverlap(*src, buf_.data(), dst, out);
  }
  return Status::Ok();
}

}  // namespace lote::engine
