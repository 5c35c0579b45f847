#include "core/checkpoint/checkpoint_manager.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <climits>
#include <cstring>
#include <optional>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "checkpoint/checkpoint.pb.h"
#include "core/checkpoint/checkpoint_file.h"
#include "core/ps/optimizer.h"

namespace twinps {
namespace {

namespace pb = ::twinps::checkpoint;

// ---------------------------------------------------------------- float bytes

// Rows of a row-major float matrix as little-endian float32 bytes.
void append_rows(std::string& out, const float* data, std::size_t count) {
  const std::size_t start = out.size();
  out.resize(start + count * sizeof(float));
  std::memcpy(out.data() + start, data, count * sizeof(float));
  if constexpr (std::endian::native == std::endian::big) {
    for (std::size_t i = start; i < out.size(); i += 4) std::reverse(out.begin() + i, out.begin() + i + 4);
  }
}
std::string to_bytes(const Matrix& m) {
  std::string out;
  append_rows(out, m.data(), static_cast<std::size_t>(m.size()));
  return out;
}
void copy_floats(float* dst, const std::string& src, std::size_t first_float, std::size_t count) {
  std::memcpy(dst, src.data() + first_float * sizeof(float), count * sizeof(float));
  if constexpr (std::endian::native == std::endian::big) {
    auto* bytes = reinterpret_cast<unsigned char*>(dst);
    for (std::size_t i = 0; i < count * sizeof(float); i += 4) std::reverse(bytes + i, bytes + i + 4);
  }
}

std::string slot_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// ---------------------------------------------------------------- layouts

// A layout's shards must cover rows [0, rows) in order without gaps or
// overlaps; a counter has exactly one shard.
Status check_layout(const VariableLayout& layout, const char* role) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(std::string(role) + " variable '" + layout.name + "' " + why);
  };
  if (layout.name.empty()) return absl::InvalidArgumentError(std::string(role) + " variable has an empty name");
  if (layout.shards.empty()) return bad("has no shards");
  if (layout.kind == VariableKind::kCounter) {
    if (layout.shards.size() != 1) return bad("is a counter split into " + std::to_string(layout.shards.size()) + " shards");
    return absl::OkStatus();
  }
  for (auto d : layout.shape)
    if (d < 0) return bad("has a negative dimension in shape " + shape_string(layout.shape));
  std::int64_t next = 0;
  for (std::size_t i = 0; i < layout.shards.size(); ++i) {
    const auto& s = layout.shards[i];
    if (s.row_offset != next || s.rows < 0)
      return bad("shard " + std::to_string(i) + " covers rows [" + std::to_string(s.row_offset) + ", " +
                 std::to_string(s.row_offset + s.rows) + "), expected to start at row " + std::to_string(next));
    next += s.rows;
  }
  if (next != layout.rows())
    return bad("shards cover " + std::to_string(next) + " rows of " + std::to_string(layout.rows()));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- verification

// Everything a checkpoint must satisfy on its own, whatever it is restored
// into; a failure means the file is damaged or was not written by save().
Status verify(const pb::Checkpoint& ckpt, const std::string& file) {
  auto loss = [&](const std::string& why) { return absl::DataLossError("checkpoint file '" + file + "' " + why); };
  if (ckpt.slot_count() < 0 || ckpt.slot_names_size() != ckpt.slot_count())
    return loss("declares " + std::to_string(ckpt.slot_count()) + " optimizer slots but names " +
                std::to_string(ckpt.slot_names_size()));
  std::set<std::string> names;
  for (const auto& var : ckpt.variables()) {
    auto bad = [&](const std::string& why) { return loss("variable '" + var.name() + "' " + why); };
    if (!names.insert(var.name()).second) return bad("appears twice");
    if (var.kind() < 0 || var.kind() > static_cast<int>(VariableKind::kCounter))
      return bad("has unknown kind " + std::to_string(var.kind()));
    Shape shape(var.shape().begin(), var.shape().end());
    for (auto d : shape)
      if (d < 0) return bad("has shape " + shape_string(shape));
    const auto kind = static_cast<VariableKind>(var.kind());
    if (kind == VariableKind::kCounter) {
      if (var.slices_size() != 0) return bad("is a counter with slices");
      continue;
    }
    if (var.has_optimizer() && kind != VariableKind::kTrainable) return bad("is not trainable but has an optimizer");
    const std::int64_t rows = storage_rows(shape), cols = storage_cols(shape);
    const int want_slots = kind != VariableKind::kTrainable ? 0
                           : var.has_optimizer()            ? var.optimizer().slot_names_size()
                                                            : ckpt.slot_count();
    std::int64_t next = 0;
    for (int i = 0; i < var.slices_size(); ++i) {
      const auto& s = var.slices(i);
      const std::string which = "slice " + std::to_string(i) + " ";
      if (s.row_offset() != next || s.rows() < 0 || s.row_offset() + s.rows() > rows)
        return bad(which + "covers rows [" + std::to_string(s.row_offset()) + ", " +
                   std::to_string(s.row_offset() + s.rows()) + "), expected to start at row " + std::to_string(next) +
                   " of " + std::to_string(rows));
      next += s.rows();
      const std::size_t bytes = static_cast<std::size_t>(s.rows() * cols) * sizeof(float);
      if (s.values().size() != bytes)
        return bad(which + "has " + std::to_string(s.values().size()) + " value bytes, expected " +
                   std::to_string(bytes));
      if (s.slots_size() != want_slots)
        return bad(which + "has " + std::to_string(s.slots_size()) + " optimizer slots, expected " +
                   std::to_string(want_slots));
      for (const auto& slot : s.slots())
        if (slot.size() != bytes)
          return bad(which + "has a slot of " + std::to_string(slot.size()) + " bytes, expected " +
                     std::to_string(bytes));
      if (s.step() < 0) return bad(which + "has a negative step");
    }
    if (next != rows) return bad("slices cover " + std::to_string(next) + " of " + std::to_string(rows) + " rows");
  }
  return absl::OkStatus();
}

// Cuts one saved variable along a target layout's shard boundaries.
std::vector<ShardState> reshard(const pb::Variable& var, const VariableLayout& target) {
  std::vector<ShardState> out;
  const std::int64_t cols = target.cols();
  for (std::size_t i = 0; i < target.shards.size(); ++i) {
    const ShardPlacement& p = target.shards[i];
    ShardState st;
    st.spec = ShardSpec{p.id, target.shard_name(i), target.kind, p.rows, cols};
    st.spec.optimizer = target.optimizer;
    if (target.kind == VariableKind::kCounter) {
      st.counter = var.counter();
      out.push_back(std::move(st));
      continue;
    }
    const int slot_count = var.slices_size() ? var.slices(0).slots_size() : 0;
    st.value = Matrix::Zero(p.rows, cols);
    st.slots.assign(static_cast<std::size_t>(slot_count), Matrix::Zero(p.rows, cols));
    const std::int64_t begin = p.row_offset, end = p.row_offset + p.rows;
    for (const auto& slice : var.slices()) {
      const std::int64_t lo = std::max(begin, slice.row_offset());
      const std::int64_t hi = std::min(end, slice.row_offset() + slice.rows());
      if (lo >= hi) continue;
      const auto count = static_cast<std::size_t>((hi - lo) * cols);
      const auto src = static_cast<std::size_t>((lo - slice.row_offset()) * cols);
      const auto dst = (lo - begin) * cols;
      copy_floats(st.value.data() + dst, slice.values(), src, count);
      for (int k = 0; k < slot_count; ++k)
        copy_floats(st.slots[static_cast<std::size_t>(k)].data() + dst, slice.slots(k), src, count);
      st.step = std::max(st.step, slice.step());
    }
    out.push_back(std::move(st));
  }
  return out;
}

StatusOr<pb::Checkpoint> decode(const std::string& bytes, const std::string& file) {
  auto payload = unframe_checkpoint(bytes, file);
  if (!payload.ok()) return payload.status();
  pb::Checkpoint ckpt;
  if (payload->size() > static_cast<std::size_t>(INT_MAX) ||
      !ckpt.ParseFromArray(payload->data(), static_cast<int>(payload->size())))
    return absl::DataLossError("checkpoint file '" + file + "' passes its checksum but does not parse as a checkpoint");
  TWINPS_RETURN_IF_ERROR(verify(ckpt, file));
  return ckpt;
}

bool parse_step(const std::string& name, const std::string& prefix, std::int64_t* step) {
  if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 || name[prefix.size()] != '-')
    return false;
  const char* first = name.data() + prefix.size() + 1;
  const char* last = name.data() + name.size();
  if (*first < '0' || *first > '9') return false;  // no sign
  auto [ptr, ec] = std::from_chars(first, last, *step);
  return ec == std::errc() && ptr == last;
}

// A file's name must agree with the step recorded inside it: the content,
// never the name, says how far training got. A copy or rename that breaks
// this (ckpt-60 copied to ckpt-9223372036854775807) would otherwise be taken
// for the newest checkpoint and make keep-N delete real newer ones.
Status check_name_matches(const std::string& name, const std::string& prefix, const pb::Checkpoint& ckpt,
                          const std::string& file) {
  std::int64_t named = 0;
  if (!parse_step(name, prefix, &named))
    return absl::InvalidArgumentError("'" + name + "' is not a checkpoint name ('" + prefix + "-<step>')");
  if (named == ckpt.step()) return absl::OkStatus();
  return absl::DataLossError("checkpoint file '" + file + "' is named for step " + std::to_string(named) +
                             " but records step " + std::to_string(ckpt.step()) +
                             " (its iterations): it was renamed or copied, so its name cannot be trusted; "
                             "refused (rename it to '" + prefix + "-" + std::to_string(ckpt.step()) +
                             "' to use it)");
}

}  // namespace

StatusOr<std::int64_t> CheckpointManager::verified_step(const std::string& name) const {
  const std::string file = storage_.describe(name);
  auto bytes = storage_.read(name);
  if (!bytes.ok()) return bytes.status();
  auto decoded = decode(*bytes, file);
  if (!decoded.ok()) return decoded.status();
  TWINPS_RETURN_IF_ERROR(check_name_matches(name, prefix_, *decoded, file));
  return decoded->step();
}

CheckpointManager::CheckpointManager(CheckpointStorage& storage, int max_to_keep, std::string prefix)
    : storage_(storage), max_to_keep_(max_to_keep), prefix_(std::move(prefix)) {}

// ---------------------------------------------------------------- save

StatusOr<std::string> CheckpointManager::save(std::int64_t step, const std::vector<VariableLayout>& layouts,
                                              const std::vector<ShardState>& shards,
                                              const OptimizerConfig& optimizer_config,
                                              const std::map<std::string, std::string>& metadata) {
  if (step < 0) return absl::InvalidArgumentError("checkpoint step " + std::to_string(step) + " is negative");
  const std::string name = prefix_ + "-" + std::to_string(step);
  TWINPS_RETURN_IF_ERROR(validate_storage_name(name));
  auto optimizer = Optimizer::create(optimizer_config);
  if (!optimizer.ok()) return optimizer.status();

  std::map<ShardId, const ShardState*> by_id;
  for (const auto& s : shards)
    if (!by_id.emplace(s.spec.id, &s).second)
      return absl::InvalidArgumentError("checkpoint save: shard id " + std::to_string(s.spec.id) + " given twice");

  pb::Checkpoint ckpt;
  ckpt.set_step(step);
  ckpt.set_optimizer(optimizer->name());
  ckpt.set_slot_count(static_cast<int>(optimizer->slot_count()));
  for (const auto& n : optimizer->slot_names()) ckpt.add_slot_names(n);
  for (const auto& [k, v] : metadata) (*ckpt.mutable_metadata())[k] = v;

  std::set<std::string> names;
  for (const VariableLayout& layout : layouts) {
    TWINPS_RETURN_IF_ERROR(check_layout(layout, "checkpoint save:"));
    if (!names.insert(layout.name).second)
      return absl::InvalidArgumentError("checkpoint save: variable '" + layout.name + "' appears twice");
    pb::Variable* var = ckpt.add_variables();
    var->set_name(layout.name);
    for (auto d : layout.shape) var->add_shape(d);
    var->set_kind(static_cast<int>(layout.kind));
    // The variable's own optimizer (its model's optimizer group), or the checkpoint's.
    std::optional<Optimizer> own;
    if (layout.kind == VariableKind::kTrainable && layout.optimizer) {
      auto created = Optimizer::create(*layout.optimizer);
      if (!created.ok())
        return Status(created.status().code(), "checkpoint save: variable '" + layout.name + "': " +
                                                   std::string(created.status().message()));
      own = std::move(*created);
      var->mutable_optimizer()->set_name(own->name());
      for (const auto& n : own->slot_names()) var->mutable_optimizer()->add_slot_names(n);
    }
    const Optimizer& var_optimizer = own ? *own : *optimizer;
    const std::size_t want_slots = layout.kind == VariableKind::kTrainable ? var_optimizer.slot_count() : 0;
    for (std::size_t i = 0; i < layout.shards.size(); ++i) {
      const ShardPlacement& p = layout.shards[i];
      auto it = by_id.find(p.id);
      const std::string where =
          "checkpoint save: variable '" + layout.name + "' shard " + std::to_string(i) + " (id " + std::to_string(p.id) + ")";
      if (it == by_id.end()) return absl::InvalidArgumentError(where + ": no state was given for it");
      const ShardState& st = *it->second;
      if (st.spec.kind != layout.kind)
        return absl::InvalidArgumentError(where + ": the state is of another variable kind");
      if (layout.kind == VariableKind::kCounter) {
        var->set_counter(st.counter);
        continue;
      }
      if (st.value.rows() != p.rows || st.value.cols() != layout.cols())
        return absl::InvalidArgumentError(where + ": the value is " + std::to_string(st.value.rows()) + "x" +
                                          std::to_string(st.value.cols()) + ", the layout says " +
                                          std::to_string(p.rows) + "x" + std::to_string(layout.cols()));
      if (st.slots.size() != want_slots)
        return absl::InvalidArgumentError(where + ": has " + std::to_string(st.slots.size()) + " optimizer slots, " +
                                          var_optimizer.name() + " uses " + std::to_string(want_slots));
      pb::Slice* slice = var->add_slices();
      slice->set_row_offset(p.row_offset);
      slice->set_rows(p.rows);
      slice->set_step(st.step);
      slice->set_values(to_bytes(st.value));
      for (const Matrix& slot : st.slots) {
        if (slot.rows() != st.value.rows() || slot.cols() != st.value.cols())
          return absl::InvalidArgumentError(where + ": an optimizer slot has another shape than the value");
        slice->add_slots(to_bytes(slot));
      }
    }
  }

  if (ckpt.ByteSizeLong() > static_cast<std::size_t>(INT_MAX))
    return absl::ResourceExhaustedError("checkpoint '" + name + "' would be " + std::to_string(ckpt.ByteSizeLong()) +
                                        " bytes; a checkpoint is limited to 2 GiB");
  // Deterministic so that the same state always gives the same bytes (map order).
  std::string payload;
  {
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!ckpt.SerializeToCodedStream(&coded)) return absl::InternalError("cannot serialize checkpoint '" + name + "'");
  }
  TWINPS_RETURN_IF_ERROR(storage_.write_atomic(name, frame_checkpoint(payload)));

  if (max_to_keep_ > 0) {
    auto existing = list();
    if (!existing.ok()) return existing.status();
    // Only checkpoints that verify and whose name agrees with their content
    // count, ordered by the step recorded inside: a damaged or misnamed file
    // is neither counted nor removed (it is not known to be older), and the
    // checkpoint just written is never the one removed.
    std::vector<CheckpointInfo> others;
    for (auto& info : *existing) {
      if (info.name == name) continue;
      auto step = verified_step(info.name);
      if (step.ok()) others.push_back({info.name, *step});
    }
    std::sort(others.begin(), others.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
      return a.step != b.step ? a.step < b.step : a.name < b.name;
    });
    std::size_t excess = others.size() + 1 > static_cast<std::size_t>(max_to_keep_)
                             ? others.size() + 1 - static_cast<std::size_t>(max_to_keep_)
                             : 0;
    for (std::size_t i = 0; i < excess; ++i) {
      Status removed = storage_.remove(others[i].name);
      if (!removed.ok() && removed.code() != StatusCode::kNotFound)
        return Status(removed.code(), "saved checkpoint '" + storage_.describe(name) +
                                          "', but could not remove the old one beyond max_to_keep: " +
                                          std::string(removed.message()));
    }
  }
  return name;
}

// ---------------------------------------------------------------- list, restore

StatusOr<std::vector<CheckpointInfo>> CheckpointManager::list() const {
  auto names = storage_.list();
  if (!names.ok()) return names.status();
  std::vector<CheckpointInfo> out;
  for (const auto& n : *names) {
    std::int64_t step = 0;
    if (parse_step(n, prefix_, &step)) out.push_back({n, step});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  return out;
}

StatusOr<RestoredCheckpoint> CheckpointManager::restore(const std::string& name,
                                                        const std::vector<VariableLayout>& targets,
                                                        const OptimizerConfig& optimizer_config) const {
  auto optimizer = Optimizer::create(optimizer_config);
  if (!optimizer.ok()) return optimizer.status();
  std::set<std::string> target_names;
  for (const auto& t : targets) {
    TWINPS_RETURN_IF_ERROR(check_layout(t, "restore target"));
    if (!target_names.insert(t.name).second)
      return absl::InvalidArgumentError("restore target variable '" + t.name + "' appears twice");
  }

  const std::string file = storage_.describe(name);
  auto bytes = storage_.read(name);
  if (!bytes.ok()) return bytes.status();
  auto decoded = decode(*bytes, file);
  if (!decoded.ok()) return decoded.status();
  const pb::Checkpoint& ckpt = *decoded;
  TWINPS_RETURN_IF_ERROR(check_name_matches(name, prefix_, ckpt, file));

  std::map<std::string, const pb::Variable*> saved;
  for (const auto& v : ckpt.variables()) saved.emplace(v.name(), &v);

  RestoredCheckpoint out;
  out.name = name;
  out.step = ckpt.step();
  out.metadata = std::map<std::string, std::string>(ckpt.metadata().begin(), ckpt.metadata().end());
  for (const VariableLayout& target : targets) {
    auto mismatch = [&](const std::string& why) {
      return absl::FailedPreconditionError("checkpoint '" + file + "' does not fit variable '" + target.name +
                                           "': " + why);
    };
    auto it = saved.find(target.name);
    if (it == saved.end()) return mismatch("the checkpoint has no such variable");
    const pb::Variable& var = *it->second;
    const Shape shape(var.shape().begin(), var.shape().end());
    if (shape != target.shape)
      return mismatch("saved with shape " + shape_string(shape) + ", the target has " + shape_string(target.shape));
    if (static_cast<VariableKind>(var.kind()) != target.kind) return mismatch("saved as another variable kind");
    if (target.kind == VariableKind::kTrainable) {
      // Each side's optimizer for this variable: its own, or the checkpoint's / the run's.
      const bool saved_own = var.has_optimizer();
      const auto& names = saved_own ? var.optimizer().slot_names() : ckpt.slot_names();
      const std::vector<std::string> saved_slots(names.begin(), names.end());
      const std::string saved_by = saved_own ? var.optimizer().name() : ckpt.optimizer();
      std::optional<Optimizer> own;
      if (target.optimizer) {
        auto created = Optimizer::create(*target.optimizer);
        if (!created.ok())
          return Status(created.status().code(), "restore target variable '" + target.name + "': " +
                                                     std::string(created.status().message()));
        own = std::move(*created);
      }
      const Optimizer& want = own ? *own : *optimizer;
      if (saved_slots != want.slot_names())
        return mismatch("saved with " + std::to_string(saved_slots.size()) + " optimizer slots (" +
                        slot_list(saved_slots) + ") by " + saved_by + ", the target optimizer " + want.name() +
                        " uses " + std::to_string(want.slot_count()) + " (" + slot_list(want.slot_names()) + ")");
    }
    for (auto& st : reshard(var, target)) out.shards.push_back(std::move(st));
  }
  for (const auto& [n, v] : saved)
    if (!target_names.count(n)) out.unused_variables.push_back(n);
  return out;
}

StatusOr<RestoredCheckpoint> CheckpointManager::restore_latest(const std::vector<VariableLayout>& targets,
                                                               const OptimizerConfig& optimizer) const {
  auto infos = list();
  if (!infos.ok()) return infos.status();
  if (infos->empty())
    return absl::NotFoundError("no checkpoint named '" + prefix_ + "-<step>' in " + storage_.describe(""));
  std::vector<RefusedCheckpoint> refused;
  for (auto it = infos->rbegin(); it != infos->rend(); ++it) {
    auto restored = restore(it->name, targets, optimizer);
    if (restored.ok()) {
      restored->refused = std::move(refused);
      return restored;
    }
    const StatusCode code = restored.status().code();
    // The program's fault, not the file's: no older checkpoint would fix it.
    if (code == StatusCode::kFailedPrecondition || code == StatusCode::kInvalidArgument) return restored.status();
    refused.push_back({it->name, restored.status()});
  }
  std::string reasons;
  for (const auto& r : refused) reasons += "\n  " + r.name + ": " + std::string(r.reason.message());
  return absl::DataLossError("none of the " + std::to_string(refused.size()) + " checkpoints named '" + prefix_ +
                             "-<step>' could be restored:" + reasons);
}

}  // namespace twinps
