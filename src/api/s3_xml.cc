#include "api/s3_xml.h"

#include <expat.h>

#include <memory>

namespace lote::api {
namespace {

struct ParseState {
  XmlElement root;
  std::vector<XmlElement*> stack;
  int depth = 0;
  bool too_deep = false;
};

constexpr int kMaxDepth = 32;

std::string LocalName(const char* name) {
  std::string n(name);
  const size_t sep = n.rfind('|');  // "namespace|local" with a separator
  return sep == std::string::npos ? n : n.substr(sep + 1);
}

void OnStart(void* data, const char* name, const char** /*attributes*/) {
  auto* state = static_cast<ParseState*>(data);
  if (++state->depth > kMaxDepth) {
    state->too_deep = true;
    return;
  }
  if (state->stack.empty()) {
    state->root.name = LocalName(name);
    state->stack.push_back(&state->root);
    return;
  }
  XmlElement* parent = state->stack.back();
  parent->children.push_back(XmlElement{LocalName(name), "", {}});
  state->stack.push_back(&parent->children.back());
}

void OnEnd(void* data, const char* /*name*/) {
  auto* state = static_cast<ParseState*>(data);
  if (state->depth-- > kMaxDepth) return;
  if (!state->stack.empty()) state->stack.pop_back();
}

void OnText(void* data, const char* text, int len) {
  auto* state = static_cast<ParseState*>(data);
  if (state->too_deep || state->stack.empty()) return;
  state->stack.back()->text.append(text, static_cast<size_t>(len));
}

}  // namespace

const XmlElement* XmlElement::Child(std::string_view child) const {
  for (const XmlElement& c : children)
    if (c.name == child) return &c;
  return nullptr;
}

Result<XmlElement> ParseXml(std::string_view xml) {
  std::unique_ptr<XML_ParserStruct, decltype(&XML_ParserFree)> parser(
      XML_ParserCreateNS(nullptr, '|'), XML_ParserFree);
  ParseState state;
  // The stack holds the open path; a vector of children grows only while its
  // parent is the top, so no open element's address changes.
  XML_SetUserData(parser.get(), &state);
  XML_SetElementHandler(parser.get(), OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser.get(), OnText);
  if (XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), /*isFinal=*/1) !=
      XML_STATUS_OK) {
    return Status::InvalidArgument(
        std::string("MalformedXML: The XML you provided was not well-formed or did not validate "
                    "against our published schema (") +
        XML_ErrorString(XML_GetErrorCode(parser.get())) + " at line " +
        std::to_string(XML_GetCurrentLineNumber(parser.get())) + ")");
  }
  if (state.too_deep) {
    return Status::InvalidArgument("MalformedXML: elements are nested more than " +
                                   std::to_string(kMaxDepth) + " deep");
  }
  return std::move(state.root);
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace lote::api
