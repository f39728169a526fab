//===- Npy.cpp - NumPy .npy files -------------------------------*- C++ -*-===//
#include "ir/Npy.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {

constexpr DType kDTypes[] = {
#define DTYPE(E, N, B, W, F, S, K, C) DType::E,
#include "ir/DTypes.def"
};

// Finds the value text of `'key':` in a header dict.
std::string dictValue(const std::string &header, const std::string &key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos)
    return "";
  size_t colon = header.find(':', k);
  if (colon == std::string::npos)
    return "";
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos)
    return "";
  if (header[start] == '(') {
    size_t end = header.find(')', start);
    return end == std::string::npos ? "" : header.substr(start, end - start + 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end == std::string::npos ? std::string::npos : end - start);
}
} // namespace

std::string npyDescr(DType t) {
  if (t == DType::BF16 || isStorageDType(t))
    return "";
  const char kind = t == DType::Bool ? 'b' : isFloat(t) ? 'f' : isSignedInt(t) ? 'i' : 'u';
  const size_t bytes = dtypeSize(t);
  return std::string(1, bytes == 1 ? '|' : '<') + kind + std::to_string(bytes);
}

FailureOr<Tensor> parseNpy(std::string_view bytes, const std::string &what,
                           DiagnosticEngine &diag) {
  auto bad = [&](const std::string &why) -> FailureOr<Tensor> {
    return diag.emitError(Location()) << "'" << what << "' is not a valid .npy file: " << why;
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY")
    return bad("missing the \\x93NUMPY magic");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return bad("unsupported version " + std::to_string(major));
  }
  if (headerStart + headerLen > bytes.size())
    return bad("truncated header");
  std::string header(bytes.substr(headerStart, headerLen));
  std::string descr = dictValue(header, "descr");
  std::string fortran = dictValue(header, "fortran_order");
  std::string shapeText = dictValue(header, "shape");
  if (descr.size() < 2 || shapeText.empty())
    return bad("header lacks 'descr' or 'shape'");
  descr = descr.substr(1, descr.size() - 2);
  if (fortran.rfind("True", 0) == 0)
    return bad("Fortran-order arrays are not supported; save with np.ascontiguousarray");
  std::optional<DType> found;
  std::string supported;
  for (DType t : kDTypes) {
    const std::string d = npyDescr(t);
    if (d.empty())
      continue;
    supported += (supported.empty() ? "" : " ") + d.substr(1);
    if (descr == d || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == d.substr(1)))
      found = t;
  }
  if (!found)
    return bad("unsupported dtype '" + descr + "' (supported: " + supported + ", little-endian)");
  std::vector<int64_t> shape;
  std::string inner = shapeText.substr(1, shapeText.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a == std::string::npos)
      continue;
    item = item.substr(a, b - a + 1);
    if (!item.empty() && item.back() == 'L')
      item.pop_back();
    int64_t v;
    auto res = std::from_chars(item.data(), item.data() + item.size(), v);
    if (res.ec != std::errc() || res.ptr != item.data() + item.size() || v < 0)
      return bad("bad shape " + shapeText);
    shape.push_back(v);
  }
  size_t dataStart = headerStart + headerLen;
  auto n = checkedNumElements(shape);
  auto need = n ? checkedByteSize(*n, dtypeSize(*found), kMaxTensorFileBytes) : std::nullopt;
  if (!need)
    return bad("shape " + shapeText + " is too large");
  if (bytes.size() - dataStart < *need)
    return bad("data is truncated: shape " + shapeText + " needs " + std::to_string(*need) +
               " bytes, file has " + std::to_string(bytes.size() - dataStart));
  return Tensor::fromBytes(*found, shape, bytes.data() + dataStart);
}

FailureOr<Tensor> readNpy(const std::string &path, DiagnosticEngine &diag) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return diag.emitError(Location()) << "cannot open '" << path << "'";
  std::stringstream ss;
  ss << in.rdbuf();
  return parseNpy(ss.str(), path, diag);
}

std::string encodeNpy(const Tensor &t) {
  const std::string descr = npyDescr(t.dtype());
  KILN_ASSERT(!descr.empty() && "encodeNpy: callers check the dtype first");
  std::string shape = "(";
  for (int64_t d : t.shape())
    shape += std::to_string(d) + ",";
  if (t.rank() > 1)
    shape.pop_back();
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 255);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char *>(t.rawData()), t.byteSize());
  return out;
}

LogicalResult writeNpy(const std::string &path, const Tensor &t, DiagnosticEngine &diag) {
  if (npyDescr(t.dtype()).empty())
    return diag.emitError(Location()) << "cannot write '" << path << "': " << dtypeName(t.dtype())
                                      << " has no NumPy dtype; cast it to f32 first";
  std::ofstream out(path, std::ios::binary);
  if (!out)
    return diag.emitError(Location()) << "cannot write '" << path << "'";
  std::string bytes = encodeNpy(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    return diag.emitError(Location()) << "error writing '" << path << "'";
  return success();
}

} // namespace kiln
