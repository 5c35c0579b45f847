#pragma once
// Where twinps finds the files it ships — scenarios/ with its models/ and
// profiles/, and the example specs examples/*/model.textproto — when a relative path given to it (or one of its defaults, such
// as `tune --validate`'s models) does not exist from the current directory:
//   1. --data-dir DIR, where a command offers it;
//   2. the TWINPS_DATA_DIR environment variable;
//   3. share/twinps beside the binary: <prefix>/share/twinps after
//      `cmake --install`, <build>/share/twinps in a build tree (linked to the
//      sources at configure time).
// Each directory holds the repository's layout: scenarios/tutorial.textproto,
// scenarios/models/dense_heavy.textproto, scenarios/profiles/...,
// examples/ctr/model.textproto
#include <string>
#include <vector>

namespace twinps::cli {

// The data directories to search, in order (those that exist).
std::vector<std::string> data_dirs(const std::string& flag = "");

// `path` itself when it is absolute or exists; else the first data directory's
// `path` that exists; else `path` unchanged (its reader then reports it missing).
std::string find_data(const std::string& path, const std::string& flag = "");

// "looked in DIR1, DIR2" for messages about a file that was not found.
std::string data_search_note(const std::string& flag = "");

}  // namespace twinps::cli
