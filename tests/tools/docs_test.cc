// The repository stands on its own: every statement id a comment, test,
// scenario or document cites (C5, E2, W9, S33 ...) is defined in
// docs/semantics.md, and nothing points to the team's shared folder beside
// the checkout, which users of the repository do not have.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "tests/sim/test_paths.h"
#include "tests/tools/read_file.h"

namespace twinps {
namespace {

namespace fs = std::filesystem;

// The repository's own text files: sources, scenarios, documents, notebooks
// and scripts; never build trees or version control.
std::vector<fs::path> repository_files() {
  const fs::path root = sim::testing::source_dir();
  static const std::set<std::string> kExtensions = {".cc", ".h", ".proto", ".textproto", ".md", ".txt",
                                                    ".py", ".ipynb", ".json", ".sh", ".cmake"};
  static const std::set<std::string> kScripts = {"run"};  // tools/run, notebooks/run
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory()) {
      if (name == ".git" || name.rfind("build", 0) == 0 || name == ".ipynb_checkpoints") it.disable_recursion_pending();
      continue;
    }
    if (kExtensions.count(it->path().extension().string()) || kScripts.count(name)) out.push_back(it->path());
  }
  return out;
}

// Ids defined in docs/semantics.md: "**C5** —" paragraphs and "| S33 |" table rows.
std::set<std::string> defined_ids() {
  const std::string text = testing::read_file(sim::testing::source_dir() / "docs" / "semantics.md");
  std::set<std::string> ids;
  static const std::regex kParagraph(R"(^\*\*([CERWPVAL][0-9]{1,2})\*\* —)", std::regex::multiline);
  static const std::regex kRow(R"(^\| (S[0-9]{1,2}) \|)", std::regex::multiline);
  for (const auto* re : {&kParagraph, &kRow})
    for (std::sregex_iterator m(text.begin(), text.end(), *re), end; m != end; ++m) ids.insert((*m)[1]);
  return ids;
}

TEST(DocsTest, SemanticsDefinesEveryStatementGroup) {
  const auto ids = defined_ids();
  for (const char* id : {"C1", "C23", "E1", "E12", "R1", "R12", "W1", "W10", "P1", "P9", "V1", "V11", "A1", "A6",
                         "L1", "L11", "S1", "S40"})
    EXPECT_TRUE(ids.count(id)) << id << " is not defined in docs/semantics.md";
}

// The statement ids `text` cites that `ids` does not define, each with the
// offset of its first citation.
std::map<std::string, std::size_t> undefined_citations(const std::string& text, const std::set<std::string>& ids) {
  // A statement id: a group letter and a number, standing alone (not part of
  // a longer word such as a hex constant or "E2E"). Criteo's columns share
  // the look (I1..I13, C1..C26): they are written as a range, after
  // "column" or quoted as a name ("C24" in a model spec), and are not
  // statement ids.
  static const std::regex kCited(R"((^|[^A-Za-z0-9_./-])([CERWPVALS][0-9]{1,2})(?![A-Za-z0-9_]|\.\.))");
  std::map<std::string, std::size_t> out;
  for (std::sregex_iterator m(text.begin(), text.end(), kCited), end; m != end; ++m) {
    const std::string id = (*m)[2];
    const auto at = static_cast<std::size_t>(m->position(2));
    if (ids.count(id) || out.count(id)) continue;
    if (at >= 7 && text.compare(at - 7, 7, "column ") == 0) continue;
    if (at >= 1 && text[at - 1] == '"' && text.compare(at + id.size(), 1, "\"") == 0) continue;
    out[id] = at;
  }
  return out;
}

TEST(DocsTest, TheCheckFindsUndefinedIdsAndOnlyThem) {
  const std::set<std::string> ids = {"C5", "E2", "W3", "P4", "R7", "R10"};
  const auto found = undefined_citations(
      "// E2: cancel (C5, W3/P4, R7–R10); see C" "99 and spec V4.\n"  // (split: this file is checked too)
      "0xE2 E2E C5x column C26 C1..C26 v2 E2 name: \"C" "26\" \"R" "20 \n",
      ids);
  std::set<std::string> names;
  for (const auto& [id, at] : found) names.insert(id);
  EXPECT_EQ(names, (std::set<std::string>{"C" "99", "V4", "R" "20"}));
}

TEST(DocsTest, EveryCitedStatementIdIsDefinedInSemantics) {
  const auto ids = defined_ids();
  ASSERT_GT(ids.size(), 100u) << "docs/semantics.md could not be read";
  for (const auto& file : repository_files()) {
    const std::string text = testing::read_file(file);
    for (const auto& [id, at] : undefined_citations(text, ids)) {
      const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
      ADD_FAILURE() << fs::relative(file, sim::testing::source_dir()).string() << ":" << line << " cites " << id
                    << ", which docs/semantics.md does not define";
    }
  }
}

TEST(DocsTest, NothingPointsOutsideTheRepository) {
  for (const auto& file : repository_files()) {
    const std::string text = testing::read_file(file);
    static const std::string kOutside = std::string("..") + "/shared";  // spelt so this file does not match
    const auto at = text.find(kOutside);
    if (at == std::string::npos) continue;
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
    ADD_FAILURE() << fs::relative(file, sim::testing::source_dir()).string() << ":" << line
                  << " refers to " << kOutside << ", which users of the repository cannot open";
  }
}

TEST(DocsTest, TheReadmeCountsTheScenariosThatExist) {
  const fs::path root = sim::testing::source_dir();
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(root / "scenarios")) files += e.path().extension() == ".textproto";
  const std::string readme = testing::read_file(root / "README.md");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(readme, m, std::regex(R"(`scenarios/` holds (\d+))")))
      << "README.md no longer says how many scenarios scenarios/ holds";
  EXPECT_EQ(std::stoul(m[1]), files) << "README.md says scenarios/ holds " << m[1] << "; it holds " << files;
}

}  // namespace
}  // namespace twinps
