// The XML of S3's REST protocol: a small element tree parsed with expat (the
// request bodies S3 takes: Delete, CompleteMultipartUpload,
// CreateBucketConfiguration) and escaping for the answers lote writes.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::api {

struct XmlElement {
  std::string name;  // local name, without a namespace
  std::string text;  // the character data directly inside it
  std::vector<XmlElement> children;
  // The first child with this name, or null.
  const XmlElement* Child(std::string_view child) const;
};

// InvalidArgument ("MalformedXML: ...") when `xml` is not well formed.
Result<XmlElement> ParseXml(std::string_view xml);
// Escapes &, <, >, " and ' for element text and attribute values.
std::string XmlEscape(std::string_view text);

}  // namespace lote::api
