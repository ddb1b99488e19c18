// The recipe's config.txt and its templates: what `lote setup`, `lote data
// prepare`, `lote resources` and `lote submit` read when run in an example
// directory.
//
// config.txt holds KEY=VALUE lines (an optional `export ` prefix, '#'
// comments, values optionally in single or double quotes), as the recipe's
// shell scripts source it. A value may use ${NAME} and ${NAME:-default}; NAME
// is an earlier key of the file, else a built-in (CONFIG_DIR: the folder of
// config.txt; LOTE_BIN: the running lote binary; LOTE_BIN_DIR: its folder),
// else the environment.
// Something undefined is an error naming it and its line: the recipe's
// envsubst silently made it empty.
//
// Templates use ${NAME} only (a bare $NAME is left alone, so shell commands
// inside templates keep their own variables); NAME is a key of the config,
// then a built-in, then the environment; undefined is an error naming the
// template, its line and the name.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote {

// The name of the file the workflow commands look for in the current folder.
inline constexpr const char* kConfigFileName = "config.txt";

class RecipeConfig {
 public:
  // Reads and expands `path`. InvalidArgument naming the line for a line that
  // is not KEY=VALUE, a bad key, or an undefined variable; NotFound if the
  // file does not exist.
  static Result<RecipeConfig> Load(const std::string& path);
  // Parses text as if read from `path` (tests).
  static Result<RecipeConfig> Parse(const std::string& text, const std::string& path);

  const std::string& path() const { return path_; }
  // The absolute folder of config.txt (files named in it are relative to it).
  const std::string& dir() const { return dir_; }

  // A key's expanded value, or nullopt if the file does not set it.
  std::optional<std::string> Get(const std::string& key) const;
  // The value, or `fallback` when the key is absent or empty.
  std::string GetOr(const std::string& key, const std::string& fallback) const;
  // InvalidArgument naming the key and the file when it is absent or empty.
  Result<std::string> Require(const std::string& key) const;
  // A positive integer key; InvalidArgument naming the key otherwise.
  Result<int64_t> RequireInt(const std::string& key) const;
  // true/false (also yes/no, 1/0, case-insensitive); InvalidArgument otherwise.
  Result<bool> GetBool(const std::string& key, bool fallback) const;
  // A path from the config, relative paths taken from dir().
  std::string ResolvePath(const std::string& value) const;

  // Keys in file order with their expanded values.
  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }

  // Looks NAME up as a template does: a key, a built-in, the environment.
  std::optional<std::string> Lookup(const std::string& name) const;

 private:
  std::string path_;
  std::string dir_;
  std::vector<std::pair<std::string, std::string>> entries_;
  std::map<std::string, std::string> values_;
};

// Finds the config: `flag` when given, else ./config.txt. NotFound with a
// hint ("run this in an example folder such as examples/llama2, or pass
// --config-file") when there is none.
Result<RecipeConfig> LoadRecipeConfig(const std::string& flag);

// Renders a template text: ${NAME} → config.Lookup(NAME). `name` is used in
// errors ("templates/job_def.json:12: ${CE_NAME} is not defined ...").
Result<std::string> RenderTemplate(const std::string& text, const std::string& name,
                                   const RecipeConfig& config);

// The lote binary that is running (for ${LOTE_BIN}).
std::string SelfBinary();

}  // namespace lote
