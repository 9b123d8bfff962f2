"""``python -m app.terminology build [FOLDER]``: write the index of the packages installed in
FOLDER (default: this installation's ``terminology/packages``), as the install step does."""

from __future__ import annotations

import sys
from pathlib import Path

from app.terminology import INSTALL_COMMAND, default_packages_dir, package_dirs
from app.terminology._build import INDEX_FILE, build_index, write_index


def main(argv: list[str]) -> int:
    """Build the index; 2 on a wrong command line, 1 when no package is installed."""
    if not argv or argv[0] != "build" or len(argv) > 2:
        print("usage: python -m app.terminology build [FOLDER]", file=sys.stderr)
        return 2
    folder = Path(argv[1]) if len(argv) == 2 else default_packages_dir()
    packages = package_dirs(folder)
    if not packages:
        print(f"no terminology package in {folder}: run {INSTALL_COMMAND}", file=sys.stderr)
        return 1
    index = build_index(packages)
    write_index(index, folder / INDEX_FILE)
    names = ", ".join(f"{p['name']}#{p['version']}" for p in index["packages"])
    print(
        f"indexed {names}: {index['counts']['CodeSystem']} CodeSystems, "
        f"{index['counts']['NamingSystem']} NamingSystems, {len(index['aliases'])} aliases"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
