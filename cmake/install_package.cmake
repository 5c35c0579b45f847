# `cmake --install` installs, beside the twinps binary and its data
# (tools/CMakeLists.txt), what a C++ project outside this tree needs to build
# against twinps (docs/extending.md):
#
#   find_package(twinps CONFIG REQUIRED)
#   target_link_libraries(my_trainer PRIVATE twinps::core)   # or twinps::inmemory, twinps::net, twinps::sim
#
# Libraries (static) in lib/, headers in include/twinps/ laid out as in the
# source tree (core/..., inmemory/..., sim/..., net/...) with the generated Protobuf headers
# (model/model_spec.pb.h ...), and the CMake package in lib/cmake/twinps/:
# the exported targets, twinpsConfig.cmake (finding the dependencies) and
# twinpsConfigVersion.cmake (this project()'s VERSION).
#
# All of it is the install component "development"; the binary and its data
# are "runtime" (`cmake --install build --component runtime` installs just
# those, ~170 MB of the ~500 MB a debug-info build installs).
include(CMakePackageConfigHelpers)

set(TWINPS_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/twinps)
set(TWINPS_EXPORTED_LIBRARIES twinps_core_proto twinps_core twinps_inmemory twinps_sim_proto twinps_sim twinps_net_proto twinps_net)

foreach(library ${TWINPS_EXPORTED_LIBRARIES})
  # twinps_core is twinps::core outside.
  string(REGEX REPLACE "^twinps_" "" exported_name ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${exported_name})
endforeach()

# A sanitized build's libraries need the sanitizer's runtime wherever they are
# linked, and the project using them must compile the headers the same way:
# Eigen allocates with plain malloc, or with its own aligned scheme under
# AddressSanitizer (__SANITIZE_ADDRESS__), so a matrix made in the user's code
# and freed in the library's would be freed the other way (heap-buffer-overflow
# seen in examples/custom_model against an ASan install). The installed core
# carries both options.
if(TWINPS_SANITIZE STREQUAL "thread")
  target_compile_options(twinps_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=thread>)
  target_link_options(twinps_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=thread>)
elseif(TWINPS_SANITIZE)
  target_compile_options(twinps_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
  target_link_options(twinps_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
endif()

install(TARGETS ${TWINPS_EXPORTED_LIBRARIES} EXPORT twinpsTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        INCLUDES DESTINATION ${TWINPS_INSTALL_INCLUDEDIR})

# Headers: the sources' (tools/ is the CLI, not a library) and the generated ones.
foreach(layer core inmemory sim net)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer} DESTINATION ${TWINPS_INSTALL_INCLUDEDIR} COMPONENT development
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/gen/ DESTINATION ${TWINPS_INSTALL_INCLUDEDIR} COMPONENT development
        FILES_MATCHING PATTERN "*.pb.h")

install(EXPORT twinpsTargets NAMESPACE twinps:: DESTINATION ${TWINPS_CMAKE_PACKAGE_DIR} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/twinpsConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/twinpsConfig.cmake
                              INSTALL_DESTINATION ${TWINPS_CMAKE_PACKAGE_DIR})
# 0.x releases promise nothing across minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/twinpsConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/twinpsConfig.cmake ${PROJECT_BINARY_DIR}/cmake/twinpsConfigVersion.cmake
        DESTINATION ${TWINPS_CMAKE_PACKAGE_DIR} COMPONENT development)
