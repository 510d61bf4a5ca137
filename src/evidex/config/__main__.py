"""`python -m evidex.config --reference`: print the configuration reference (Markdown) to stdout."""

from __future__ import annotations

import argparse

from evidex.config.reference import reference


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m evidex.config",
                                     description="Print the configuration reference generated from the schema.")
    parser.add_argument("--reference", action="store_true", help="the Markdown reference (the default)")
    parser.parse_args(argv)
    print(reference(), end="")


if __name__ == "__main__":
    main()
