#pragma once
// `twinps --version`: this build's version and the libraries it was built
// with, for bug reports.
#include <string>

namespace twinps::cli {

std::string version_text();

}  // namespace twinps::cli
