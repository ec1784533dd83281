// Deflate (RFC 1951) through zlib, for the writers that compress: a zip member's raw
// stream (data/zip.h) and a .gz file's gzip stream (RFC 1952: the NIfTI writer's .nii.gz).
//
//   const std::string gz = data::deflated(bytes, data::DeflateWrapper::Gzip);
#pragma once

#include <string>
#include <string_view>

namespace kiln::data {

enum class DeflateWrapper { Raw, Gzip };

// `bytes` compressed at zlib's level 6; an input of 4 GiB or more is an error (one zlib
// call takes less).
std::string deflated(std::string_view bytes, DeflateWrapper wrapper);

}  // namespace kiln::data
