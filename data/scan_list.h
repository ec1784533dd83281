// Lists of one's own scans: what a CSV manifest or a folder says about each scan, before
// anything is read: its image file(s), its label(s) as text, and its split when it says.
//
//   manifest.csv (a row per scan; paths relative to the CSV's folder, or absolute):
//     image,label,split            one image column, or several (channels, in order)
//     scans/a.nii.gz,benign,train  label columns as named (several: multi-label or
//     ...                          several regression targets); split: train, val, test
//   folder/<class>/<files>          ImageFolder's layout: a class per sub-folder
//   folder/{train,val,test}/<class>/<files>   the same, with the splits given
//
// Files are volume files (data/volume_file.h: .nii, .nii.gz, .npy, .npz); in a folder,
// other files are ignored, a class folder's files are found at any depth, and classes
// and files are sorted by name, as torchvision's ImageFolder does; hidden folders
// (".ipynb_checkpoints") are not classes. A label's text is taken without the spaces
// around it. A structural problem (an unreadable CSV, a missing column, a folder
// without classes) is an error at once; a problem of one row (an empty path, a file that
// is not a volume, a split that is not train, val or test) is kept in `problems`, one
// line each naming the row, so a check reports every one (train/scans.h).
#pragma once

#include <string>
#include <vector>

namespace kiln::data {

struct ScanRecord {
  std::vector<std::string> images = {};  // one file per channel
  std::vector<std::string> labels = {};  // one text per label column
  std::string split = "";                // "train", "val", "test", or empty: not given
  std::string where = "";                // "manifest.csv line 12", or a folder's file
};

struct ScanList {
  std::string source = "";                      // the CSV or the folder
  std::vector<std::string> image_columns = {};  // a folder's: {"image"}
  std::vector<std::string> label_columns = {};  // a folder's: {"class"}
  std::vector<ScanRecord> records = {};
  std::vector<std::string> problems = {};
  bool has_splits = false;  // a split column, or train/val/test folders
  bool folder = false;      // a folder of class folders (labels are the class folders' names)
};

struct ScanListOptions {
  std::vector<std::string> image_columns = {"image"};
  std::vector<std::string> label_columns = {"label"};
  std::string split_column = "split";  // optional in the manifest
  bool with_labels = true;             // false: label_columns are not read (kiln predict's manifests)
};

// A folder (either layout) or a CSV manifest.
ScanList read_scan_list(const std::string& path, const ScanListOptions& options = {});

// The folder layout alone: classes (sorted sub-folder names) and each class's volume files
// (sorted); errors name the folder. FolderDataset (data/folder_dataset.h) lists with it.
struct ClassFolder {
  std::vector<std::string> classes;
  std::vector<std::vector<std::string>> files;  // per class
};
ClassFolder list_class_folder(const std::string& root, const char* who);

// The split names a manifest or folder may give, in order.
inline constexpr const char* kSplitNames[] = {"train", "val", "test"};

}  // namespace kiln::data
