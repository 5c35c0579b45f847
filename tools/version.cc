#include "tools/version.h"

#include "tools/data_dir.h"

#include <boost/version.hpp>
#include <google/protobuf/stubs/common.h>
#include <grpcpp/version_info.h>

#include <Eigen/Core>

#ifndef TWINPS_VERSION
#error "TWINPS_VERSION is set by tools/CMakeLists.txt from the project's version"
#endif

namespace twinps::cli {
namespace {

std::string data_location() {
  const auto dirs = data_dirs();
  return dirs.empty() ? "none found beside the binary (set TWINPS_DATA_DIR)" : dirs.front();
}

}  // namespace

std::string version_text() {
  std::string boost = BOOST_LIB_VERSION;
  for (auto& c : boost)
    if (c == '_') c = '.';
  return std::string("twinps ") + TWINPS_VERSION + "\nbuilt with gRPC " GRPC_CPP_VERSION_STRING ", Protobuf " +
         google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION) + ", Boost " + boost + ", Eigen " +
         std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + "\ndata (scenarios, models, profiles): " + data_location();
}

}  // namespace twinps::cli
