"""get_weather with a fake WeatherProvider; Open-Meteo's JSON parsed from the packaged recordings."""

from __future__ import annotations

import json

import pytest

from assistant.errors import ConfigError
from assistant.testing.replay import DEFAULT_RECORDINGS
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.catalog import build_toolbox
from assistant.tools.weather import (
    CAPABILITY,
    WMO_CODES,
    CurrentWeather,
    DailyWeather,
    Forecast,
    OpenMeteoWeather,
    Place,
    describe_wmo,
    get_weather,
    parse_forecast,
)

OSLO = Place("Oslo", "Norway", 59.91, 10.75, "Europe/Oslo")
UNITS = {"temperature": "°C", "humidity": "%", "precipitation": "mm", "wind_speed": "km/h"}


class FakeWeather:
    """A WeatherProvider with one known place and a week of forecast; records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, object]] = []

    def geocode(self, name: str) -> Place | None:
        self.asked.append(("geocode", name))
        return OSLO if name.casefold() == "oslo" else None

    def forecast(self, place: Place, days: int) -> Forecast:
        self.asked.append(("forecast", days))
        daily = tuple(DailyWeather(f"2026-11-{12 + i}", code, 4.0 + i, -1.0 + i, 0.5 * i, 10 * i)
                      for i, code in enumerate([0, 61, 71, 95, 45, 3, 2]))
        return Forecast(CurrentWeather("2026-11-12T10:00", 2.5, -1.0, 77, 0.0, 12.0, 2), daily, UNITS)


def ctx(provider: object | None = None) -> ToolContext:
    return ToolContext("u1", {"weather": provider or FakeWeather()})


def test_schema_is_small_and_bounded() -> None:
    params = get_weather.spec.parameters
    assert params["required"] == ["location"]
    assert params["properties"]["days"]["minimum"] == 1 and params["properties"]["days"]["maximum"] == 7
    assert get_weather.capability == "weather"


def test_every_wmo_code_open_meteo_documents_has_words() -> None:
    assert set(WMO_CODES) == {0, 1, 2, 3, 45, 48, 51, 53, 55, 56, 57, 61, 63, 65, 66, 67, 71, 73, 75, 77,
                              80, 81, 82, 85, 86, 95, 96, 99}
    assert describe_wmo(0) == "clear sky"
    assert describe_wmo(65) == "heavy rain"
    assert describe_wmo(99) == "thunderstorm with heavy hail"
    assert describe_wmo(3.0) == "overcast"
    assert describe_wmo(42) == "unknown conditions (WMO code 42)"
    assert describe_wmo(None) is None


def test_current_weather_and_the_requested_days() -> None:
    fake = FakeWeather()
    result = get_weather(ctx(fake), {"location": " Oslo ", "days": 3})
    assert result["location"] == {"name": "Oslo", "country": "Norway"}
    assert result["current"] == {"time": "2026-11-12T10:00", "temperature": 2.5, "feels_like": -1.0, "humidity": 77,
                                 "precipitation": 0.0, "wind_speed": 12.0, "conditions": "partly cloudy",
                                 "units": UNITS}
    assert [d["conditions"] for d in result["daily"]] == ["clear sky", "slight rain", "slight snowfall"]
    assert result["daily"][1] == {"date": "2026-11-13", "conditions": "slight rain", "max": 5.0, "min": 0.0,
                                  "precipitation": 0.5, "precipitation_probability": 10}
    assert fake.asked == [("geocode", "Oslo"), ("forecast", 3)]
    assert len(json.dumps(get_weather(ctx(), {"location": "Oslo", "days": 7}))) < 4000


def test_unknown_place_is_reported_to_the_model() -> None:
    with pytest.raises(ToolError, match="no place called 'Atlantis' was found"):
        get_weather(ctx(), {"location": "Atlantis"})


@pytest.mark.parametrize("arguments", [{"location": "Oslo", "days": 0}, {"location": "Oslo", "days": 8},
                                       {"location": ""}, {}, {"location": "Oslo", "unit": "kelvin"}])
def test_bad_arguments_are_refused(arguments: dict) -> None:
    with pytest.raises(ToolError, match="invalid arguments for get_weather"):
        get_weather(ctx(), arguments)


def test_blank_location_and_missing_backend() -> None:
    with pytest.raises(ToolError, match="location must name a place"):
        get_weather(ctx(), {"location": "   "})
    with pytest.raises(ToolError, match="weather capability is not configured"):
        get_weather(ToolContext("u1"), {"location": "Oslo"})


def test_open_meteo_forecast_json_is_parsed() -> None:
    data = json.loads((DEFAULT_RECORDINGS / "open-meteo" / "forecast-berlin.json").read_text(encoding="utf-8"))
    forecast = parse_forecast(data)
    assert forecast.current == CurrentWeather("2026-11-12T14:15", 7.4, 4.1, 81, 0.0, 14.8, 3)
    assert len(forecast.daily) == 7
    assert forecast.daily[2] == DailyWeather("2026-11-14", 63, 7.6, 4.8, 7.9, 90)
    assert forecast.units == UNITS


def test_a_forecast_with_daily_values_only() -> None:
    forecast = parse_forecast({"daily_units": {"temperature_2m_max": "°F", "precipitation_sum": "inch"},
                               "daily": {"time": ["2026-11-12"], "temperature_2m_max": [50.1]}})
    assert forecast.current is None
    assert forecast.daily == (DailyWeather("2026-11-12", None, 50.1, None, None, None),)
    assert forecast.units == {"temperature": "°F", "precipitation": "inch"}


def test_capability_is_registered_only_when_enabled(make_settings) -> None:
    off = build_toolbox(CapabilityDeps(make_settings()), [CAPABILITY])
    assert len(off.registry) == 0 and off.status[0].reason == "not configured"
    on = build_toolbox(CapabilityDeps(make_settings(weather={"enabled": True})), [CAPABILITY])
    assert on.registry.names() == ["get_weather"]
    assert isinstance(on.backends["weather"], OpenMeteoWeather)
    on.close()
    with pytest.raises(ConfigError, match="weather.backend: unknown backend 'met-no'"):
        build_toolbox(CapabilityDeps(make_settings(weather={"enabled": True, "backend": "met-no"})), [CAPABILITY])
