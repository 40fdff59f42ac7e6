"""A command's flags as TF-Slim's scripts had them: absl's flags."""

import argparse
import sys

from absl import flags

_HELP = ("-h", "--help", "--helpshort", "--helpfull", "-?")


class _Converter(flags.ArgumentParser):
    """absl's parser for a flag whose text goes through `convert`.

    `convert(text)` returns the value or raises `ValueError` with what is
    wrong; absl turns that into `flag --name=text: <what is wrong>`.
    """

    def __init__(self, convert, syntax):
        self._convert = convert
        self.syntactic_help = syntax

    def parse(self, argument):
        if not isinstance(argument, str):
            return argument  # a default, already a value
        return self._convert(argument)

    def flag_type(self):
        return "string"


class FlagParser:
    """The flags of one command, defined and parsed by absl.

    Args:
        prog: The command's name, first in its messages.
        description: One paragraph for `--help`.

    Example:
    ```python
    p = FlagParser("keras-slim-train", "Trains.")
    p.add("batch_size", 32, "The batch size.", parse=positive_int)
    p.add("clone_on_cpu", False, "Clones on CPU devices.")
    flags = p.parse_args(["--batch_size=8", "--noclone_on_cpu"])
    flags.batch_size  # 8
    ```
    """

    def __init__(self, prog, description):
        self.prog = prog
        self.description = description
        self.flag_values = flags.FlagValues()

    def add(
        self,
        name,
        default,
        help,
        *,
        parse=None,
        choices=None,
        boolean=False,
        short_name=None,
    ):
        """Defines `--name` (absl's `DEFINE_*`).

        Args:
            name: The flag's name, without dashes.
            default: Its value when not given (not parsed).
            help: Its help text.
            parse: `text -> value`, raising `ValueError`; `None` keeps the
                text (a string flag). Its `syntax` attribute, if any, says
                what it takes (`"a positive integer"`).
            choices: The values allowed (an absl enum flag).
            boolean: A boolean flag (`--name`, `--noname`,
                `--name=true`); also when `default` is a bool.
            short_name: A one-letter alias (`-v`).
        """
        common = dict(flag_values=self.flag_values, short_name=short_name)
        if choices is not None:
            flags.DEFINE_enum(name, default, list(choices), help, **common)
        elif boolean or isinstance(default, bool):
            flags.DEFINE_boolean(name, default, help, **common)
        elif parse is not None:
            syntax = getattr(parse, "syntax", "a value")
            flags.DEFINE(
                _Converter(parse, syntax), name, default, help, **common
            )
        else:
            flags.DEFINE_string(name, default, help, **common)

    def flags(self):
        """The defined flags in definition order: `[absl Flag, ...]`."""
        seen, result = set(), []
        for name in self.flag_values:  # names and short names, in order
            flag = self.flag_values[name]
            if flag.name not in seen:
                seen.add(flag.name)
                result.append(flag)
        return result

    def parse_args(self, argv=None):
        """Parses `argv` (default `sys.argv[1:]`) as absl does.

        Returns:
            An `argparse.Namespace` of every flag's value.

        Raises:
            SystemExit: 0 after `--help`; 2 for an unknown flag, a bad
                value or a stray argument (the message names it).
        """
        argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
        if any(arg in _HELP for arg in argv):
            print(self.format_help())
            raise SystemExit(0)
        self.flag_values.unparse_flags()
        try:
            rest = self.flag_values([self.prog, *argv])
        except flags.Error as error:
            self.error(str(error))
        if rest[1:]:
            self.error(
                f"unexpected arguments {rest[1:]}: flags are written "
                "--name=value or --name value (booleans --name, --noname "
                "or --name=false)"
            )
        values = self.flag_values
        return argparse.Namespace(
            **{f.name: values[f.name].value for f in self.flags()}
        )

    def error(self, message):
        """Prints `<prog>: error: <message>` and exits with code 2."""
        print(
            f"usage: {self.prog} [--flag=value ...] (--help lists them)\n"
            f"{self.prog}: error: {message}",
            file=sys.stderr,
        )
        raise SystemExit(2)

    def format_help(self):
        """`--help`: the description, then each flag as absl shows it."""
        lines = [f"usage: {self.prog} [--flag=value ...]", "", self.description]
        lines += ["", "flags:"]
        for flag in self.flags():
            lines.append(_describe(flag))
        lines += ["", "Also absl's --flagfile=<file> (one flag per line)."]
        return "\n".join(lines)


def _describe(flag):
    """One flag's help, as absl's `FlagValues.get_help` writes it."""
    name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
    if flag.short_name:
        name = f"-{flag.short_name},{name}"
    text = f"{name}: {flag.help}"
    if flag.default not in (None, [], {}):
        text += f" (default: {flag.default_as_str})"
    return flags.text_wrap(
        text, length=79, indent="      ", firstline_indent="  "
    )
