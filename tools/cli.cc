#include "tools/cli.h"

#include <cstdarg>
#include <iostream>

namespace twinps::cli {

int parse(int argc, char** argv, const std::string& usage, const po::options_description& options,
          po::variables_map& vm, const po::positional_options_description* positional) {
  try {
    auto parser = po::command_line_parser(argc, argv).options(options);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << options << "\n";
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "twinps: " << e.what() << "\n(see " << argv[0] << " --help)\n";
    return kExitBadInput;
  }
  return -1;
}

void Table::print(std::FILE* out) const {
  std::size_t width = 0;
  for (const auto& [k, v] : rows_) width = std::max(width, k.size());
  for (const auto& [k, v] : rows_) std::fprintf(out, "  %-*s  %s\n", static_cast<int>(width), k.c_str(), v.c_str());
}

std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace twinps::cli
