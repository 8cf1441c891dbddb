"""The privacy LED of voice rule 3: lit while a session captures audio, on aarch64 Linux only.

gpiozero drives the pin: it picks whichever pin library the board has (lgpio, RPi.GPIO, pigpio, its
native driver) and ships a ``MockFactory`` that lets tests watch a pin without hardware. It is imported
only when a real LED is built. Everywhere else (GPIO disabled in ``[voice.gpio]``, another platform, or a
board whose pins cannot be opened) :func:`create_privacy_led` returns a :class:`NullLed`: a no-op that
records its state and touches no hardware.
"""

from __future__ import annotations

import logging
import platform
from typing import Protocol

from assistant.config import GpioSettings

log = logging.getLogger("assistant.voice.gpio")


class PrivacyLed(Protocol):
    def on(self) -> None: ...

    def off(self) -> None: ...

    @property
    def is_lit(self) -> bool: ...

    def close(self) -> None: ...


class NullLed:
    """No hardware: remembers whether it would be lit."""

    def __init__(self) -> None:
        self._lit = False

    def on(self) -> None:
        self._lit = True

    def off(self) -> None:
        self._lit = False

    @property
    def is_lit(self) -> bool:
        return self._lit

    def close(self) -> None:
        self._lit = False


class GpiozeroLed:
    """A gpiozero ``LED`` on ``pin`` (BCM numbering); ``pin_factory`` None means the board's default."""

    def __init__(self, pin: int, pin_factory: object | None = None):
        from gpiozero import LED

        self._led = LED(pin, pin_factory=pin_factory)

    @property
    def pin(self) -> object:
        """The gpiozero pin object (a ``MockPin`` under ``MockFactory``)."""
        return self._led.pin

    def on(self) -> None:
        self._led.on()

    def off(self) -> None:
        self._led.off()

    @property
    def is_lit(self) -> bool:
        return bool(self._led.is_lit)

    def close(self) -> None:
        self._led.close()


def has_gpio_platform() -> bool:
    """True on aarch64 Linux, the only platform where the LED drives a real pin."""
    return platform.system() == "Linux" and platform.machine() == "aarch64"


def create_privacy_led(settings: GpioSettings, pin_factory: object | None = None) -> PrivacyLed:
    """A gpiozero LED on ``settings.privacy_led_pin`` when GPIO is enabled and the platform is aarch64 Linux
    (or an explicit ``pin_factory`` is given, e.g. ``gpiozero.pins.mock.MockFactory()``); else a :class:`NullLed`.

    A pin that cannot be opened (no pin library, no access to ``/dev/gpiochip*``) logs a warning and
    falls back to a :class:`NullLed`: the LED is a courtesy, never a reason for voice not to start.
    """
    if not settings.enabled:
        return NullLed()
    if pin_factory is None and not has_gpio_platform():
        log.info("privacy LED: GPIO is enabled but this is %s %s, not aarch64 Linux; the LED is a no-op",
                 platform.system(), platform.machine())
        return NullLed()
    from gpiozero.exc import GPIOZeroError

    try:
        return GpiozeroLed(settings.privacy_led_pin, pin_factory)
    except (GPIOZeroError, OSError, RuntimeError) as exc:
        log.warning("privacy LED: cannot open GPIO pin %d (%s); continuing without the LED",
                    settings.privacy_led_pin, exc)
        return NullLed()
