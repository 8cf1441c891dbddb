"""The default catalog: useful, real, read-mostly commands per OS, created once on first start.

On Linux every entry runs in the catalog's sandbox (assistant/tools/shell_sandbox.py); the ones
that must see the host's network (interfaces, sockets) or talk to systemd over the system D-Bus
say ``network=True``. Windows commands run under ``cmd.exe`` (the shell of
:class:`subprocess.Popen` there), so PowerShell ones are wrapped in ``powershell -NoProfile -Command``. Entries of risk ``high``
always need approval (see :class:`~assistant.catalog.values.RiskLevel`).
"""

from __future__ import annotations

from dataclasses import dataclass

from assistant.catalog.values import Category, RiskLevel, TargetOs


@dataclass(frozen=True)
class EntrySpec:
    """What a new catalog entry is made of (a request, or a default)."""

    name: str
    description: str
    command: str
    category: Category
    risk_level: RiskLevel
    os: TargetOs
    requires_approval: bool = False
    network: bool = False  # the command may use the network (its sandbox has none otherwise)


def _ps(script: str) -> str:
    return f'powershell -NoProfile -Command "{script}"'


C, R, O = Category, RiskLevel, TargetOs

DEFAULT_ENTRIES: tuple[EntrySpec, ...] = (
    # --- portable --------------------------------------------------------------------------------
    EntrySpec("Current user", "The account the assistant's commands run as.", "whoami", C.SECURITY, R.LOW, O.ANY),
    EntrySpec("Host name", "The machine's host name.", "hostname", C.SYSTEM, R.LOW, O.ANY),
    # --- Linux -----------------------------------------------------------------------------------
    EntrySpec("Disk usage (Linux)", "Used and free space of every mounted file system.", "df -h",
              C.DISK, R.LOW, O.LINUX),
    EntrySpec("Uptime (Linux)", "How long the system has been up, users logged in, load averages.", "uptime",
              C.SYSTEM, R.LOW, O.LINUX),
    EntrySpec("Memory usage (Linux)", "Used, free and available memory and swap.", "free -h",
              C.MEMORY, R.LOW, O.LINUX),
    EntrySpec("Network interfaces (Linux)", "Every network interface with its state and addresses.",
              "ip -brief address", C.NETWORK, R.LOW, O.LINUX, network=True),
    EntrySpec("Listening ports (Linux)", "TCP and UDP sockets listening for connections.", "ss -tuln",
              C.NETWORK, R.LOW, O.LINUX, network=True),
    EntrySpec("Failed services (Linux)", "systemd units that failed.", "systemctl --failed --no-pager",
              C.SERVICE, R.LOW, O.LINUX, network=True),
    EntrySpec("Running services (Linux)", "systemd services that are running.",
              "systemctl list-units --type=service --state=running --no-pager", C.SERVICE, R.LOW, O.LINUX,
              network=True),
    EntrySpec("Top processes by CPU (Linux)", "The 15 processes using the most CPU, with their command lines.",
              "ps aux --sort=-%cpu | head -n 16", C.PROCESS, R.MEDIUM, O.LINUX),
    EntrySpec("Kernel version (Linux)", "Kernel name, release, version and machine.", "uname -a",
              C.SYSTEM, R.LOW, O.LINUX),
    EntrySpec("DNS configuration (Linux)", "The resolver configuration: name servers and search domains.",
              "cat /etc/resolv.conf", C.NETWORK, R.LOW, O.LINUX),
    EntrySpec("OS release (Linux)", "The distribution's name and version.", "cat /etc/os-release",
              C.SYSTEM, R.LOW, O.LINUX),
    EntrySpec("Recent logins (Linux)", "The last 10 logins (users, terminals, origins).", "last -n 10",
              C.SECURITY, R.MEDIUM, O.LINUX),
    EntrySpec("Flush DNS cache (Linux)", "Empty the systemd-resolved DNS cache (changes system state).",
              "resolvectl flush-caches", C.NETWORK, R.HIGH, O.LINUX, requires_approval=True, network=True),
    # --- macOS -----------------------------------------------------------------------------------
    EntrySpec("Disk usage (macOS)", "Used and free space of every mounted volume.", "df -h",
              C.DISK, R.LOW, O.MACOS),
    EntrySpec("Uptime (macOS)", "How long the system has been up, users logged in, load averages.", "uptime",
              C.SYSTEM, R.LOW, O.MACOS),
    EntrySpec("Memory statistics (macOS)", "Virtual memory statistics (pages free, active, wired, compressed).",
              "vm_stat", C.MEMORY, R.LOW, O.MACOS),
    EntrySpec("Network interfaces (macOS)", "Every network interface with its addresses.", "ifconfig",
              C.NETWORK, R.LOW, O.MACOS),
    EntrySpec("Listening ports (macOS)", "TCP ports listening for connections and the processes behind them.",
              "lsof -nP -iTCP -sTCP:LISTEN", C.NETWORK, R.MEDIUM, O.MACOS),
    EntrySpec("Top processes by CPU (macOS)", "The 15 processes using the most CPU, with their command lines.",
              "ps aux -r | head -n 16", C.PROCESS, R.MEDIUM, O.MACOS),
    EntrySpec("macOS version", "Product name, version and build.", "sw_vers", C.SYSTEM, R.LOW, O.MACOS),
    EntrySpec("DNS configuration (macOS)", "The resolvers in use, per interface and domain.", "scutil --dns",
              C.NETWORK, R.LOW, O.MACOS),
    # --- Windows ---------------------------------------------------------------------------------
    EntrySpec("Disk usage (Windows)", "Used and free space of every drive.",
              _ps("Get-PSDrive -PSProvider FileSystem"), C.DISK, R.LOW, O.WINDOWS),
    EntrySpec("Uptime (Windows)", "Time since the last boot.",
              _ps("(Get-Date) - (Get-CimInstance Win32_OperatingSystem).LastBootUpTime"),
              C.SYSTEM, R.LOW, O.WINDOWS),
    EntrySpec("Memory usage (Windows)", "Total and free physical memory.",
              _ps("Get-CimInstance Win32_OperatingSystem | Select-Object TotalVisibleMemorySize,FreePhysicalMemory"),
              C.MEMORY, R.LOW, O.WINDOWS),
    EntrySpec("Network interfaces (Windows)", "Every network adapter with its addresses and DNS servers.",
              "ipconfig /all", C.NETWORK, R.LOW, O.WINDOWS),
    EntrySpec("Listening ports (Windows)", "TCP and UDP ports listening, with process ids.",
              'netstat -ano | findstr LISTENING', C.NETWORK, R.MEDIUM, O.WINDOWS),
    EntrySpec("Running services (Windows)", "Windows services that are running.",
              _ps("Get-Service | Where-Object Status -eq Running"), C.SERVICE, R.LOW, O.WINDOWS),
    EntrySpec("Processes (Windows)", "Every running process with its memory use.", "tasklist",
              C.PROCESS, R.MEDIUM, O.WINDOWS),
    EntrySpec("Windows version", "The Windows version and build.", "ver", C.SYSTEM, R.LOW, O.WINDOWS),
    EntrySpec("Flush DNS cache (Windows)", "Empty the DNS client cache (changes system state).",
              "ipconfig /flushdns", C.NETWORK, R.HIGH, O.WINDOWS, requires_approval=True),
)
