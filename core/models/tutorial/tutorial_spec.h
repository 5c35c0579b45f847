#pragma once
// The tutorial's model spec, examples/tutorial/model.textproto, compiled into
// the binary at build time (the file is the one source; CMake copies it in),
// so `twinps train` without --model trains it wherever the binary runs.
#include <string_view>

namespace twinps::tutorial {

// The file's text.
std::string_view spec_text();
// The name errors give it.
inline constexpr char kSpecFileName[] = "examples/tutorial/model.textproto";

}  // namespace twinps::tutorial
