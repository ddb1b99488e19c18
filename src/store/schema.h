// The database schema as an ordered list of migrations.
//
// Migration N moves a database from schema version N-1 to N. They are applied
// in order, each in its own transaction together with the update of the
// one-row `schema_version` table, so a crash leaves the schema at a whole
// version. Never edit a released migration: append a new one.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace lote::store {

struct Migration {
  int32_t version;       // the version the database has after this migration
  std::string_view sql;  // one or more statements
};

// Every migration, ascending by version starting at 1.
const std::vector<Migration>& Migrations();

// The newest schema version this binary knows.
int32_t LatestSchemaVersion();

}  // namespace lote::store
