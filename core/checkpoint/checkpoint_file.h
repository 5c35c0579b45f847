#pragma once
// The framing of a checkpoint file, so that a damaged file is detected and
// never half-loaded:
//
//   offset  size  field
//        0     8  magic "TWPSCKPT"
//        8     4  format version, little-endian (kCheckpointFormatVersion)
//       12     8  payload length in bytes, little-endian
//       20     4  CRC-32C of bytes 8..19 and of the payload, little-endian
//       24     n  payload: a serialized twinps.checkpoint.Checkpoint
//
// The checksum covers the version and the length as well as the payload, so a
// flipped bit anywhere after the magic is caught.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/runtime/status.h"

namespace twinps {

inline constexpr std::uint32_t kCheckpointFormatVersion = 1;
inline constexpr std::size_t kCheckpointHeaderSize = 24;

// Header + payload.
std::string frame_checkpoint(std::string_view payload);

// The payload of a framed file, after checking it. `file` names the file in
// errors. Truncation, trailing bytes, a wrong magic or a checksum mismatch are
// DATA_LOSS saying which; a valid file of another format version is
// FAILED_PRECONDITION.
StatusOr<std::string_view> unframe_checkpoint(std::string_view bytes, const std::string& file);

}  // namespace twinps
