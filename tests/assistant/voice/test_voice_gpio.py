"""The privacy LED: a gpiozero pin under MockFactory, and the no-op LED everywhere else."""

from __future__ import annotations

import logging

import pytest
from gpiozero.pins.mock import MockFactory

from assistant.config import GpioSettings
from assistant.voice import gpio
from assistant.voice.gpio import GpiozeroLed, NullLed, create_privacy_led


@pytest.fixture
def factory():
    pins = MockFactory()
    yield pins
    pins.close()


def test_mock_pin_follows_on_and_off(factory: MockFactory) -> None:
    led = create_privacy_led(GpioSettings(enabled=True, privacy_led_pin=17), pin_factory=factory)
    assert isinstance(led, GpiozeroLed)
    pin = factory.pin(17)
    assert led.pin is pin
    assert not led.is_lit
    assert pin.state == 0
    led.on()
    assert led.is_lit
    assert pin.state == 1
    led.off()
    assert not led.is_lit
    assert pin.state == 0
    led.close()


def test_configured_pin_is_used(factory: MockFactory) -> None:
    led = create_privacy_led(GpioSettings(enabled=True, privacy_led_pin=22), pin_factory=factory)
    led.on()
    assert factory.pin(22).state == 1
    assert factory.pin(17).state == 0
    led.close()


def test_disabled_settings_give_a_null_led(factory: MockFactory) -> None:
    led = create_privacy_led(GpioSettings(enabled=False), pin_factory=factory)
    assert isinstance(led, NullLed)
    led.on()
    assert led.is_lit
    assert factory.pin(17).state == 0  # nothing touched the pin
    led.off()
    assert not led.is_lit


def test_default_settings_are_disabled() -> None:
    assert isinstance(create_privacy_led(GpioSettings()), NullLed)


@pytest.mark.parametrize(("system", "machine"), [("Linux", "x86_64"), ("Darwin", "arm64"), ("Windows", "AMD64")])
def test_other_platforms_give_a_null_led(monkeypatch: pytest.MonkeyPatch, system: str, machine: str) -> None:
    monkeypatch.setattr(gpio.platform, "system", lambda: system)
    monkeypatch.setattr(gpio.platform, "machine", lambda: machine)
    assert not gpio.has_gpio_platform()
    assert isinstance(create_privacy_led(GpioSettings(enabled=True)), NullLed)


def test_aarch64_without_pin_access_falls_back_with_a_warning(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    # this test machine has no GPIO chip: gpiozero finds no pin factory and raises BadPinFactory
    monkeypatch.setattr(gpio.platform, "system", lambda: "Linux")
    monkeypatch.setattr(gpio.platform, "machine", lambda: "aarch64")
    assert gpio.has_gpio_platform()
    with caplog.at_level(logging.WARNING, logger="assistant.voice.gpio"), pytest.warns(Warning):
        led = create_privacy_led(GpioSettings(enabled=True, privacy_led_pin=17))
    assert isinstance(led, NullLed)
    assert "cannot open GPIO pin 17" in caplog.text
