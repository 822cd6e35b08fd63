//===- FileUtils.cpp - writing output files safely -----------------------===//

#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace tessera::runtime {

llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef data) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      !llvm::sys::fs::is_regular_file(status)) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return fail("cannot write '" + path + "': " + ec.message());
    os << data;
    return llvm::Error::success();
  }
  llvm::SmallString<256> tmp;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%", fd, tmp))
    return fail("cannot create a file next to '" + path + "': " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << data;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return fail("cannot write '" + tmp + "' (disk full?)");
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return fail("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readRegularFile(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fail("cannot read '" + path + "': " + ec.message());
  if (!llvm::sys::fs::is_regular_file(status))
    return fail("cannot read '" + path + "': not a regular file (devices, pipes and "
                "directories are not read)");
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot read '" + path + "': " + file.getError().message());
  return std::move(*file);
}

} // namespace tessera::runtime
