"""get_weather: current conditions and a daily forecast for a place name (capability ``weather``).

A :class:`WeatherProvider` has two steps, because that is how free weather APIs work: turn a place
name into coordinates (``geocode``), then ask for the forecast there (``forecast``). The tool keeps
what a person asks about (temperature, feels-like, rain, wind, words for the sky) and reports the
units the service used, so nothing depends on the configured unit being honoured.

Open-Meteo (``OpenMeteoWeather``) is the built-in backend: free, keyless, self-hostable, with a
separate geocoding API. Its ``weather_code`` is a WMO code; :data:`WMO_CODES` is the full table
Open-Meteo documents. The tool reports what the service returned, whatever date it is today.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

from pydantic import Field

from assistant.tools.base import Capability, CapabilityDeps, ToolContext, ToolError, pick_backend, tool
from assistant.tools.webclient import ServiceClient

# WMO weather interpretation codes (WW), as used by Open-Meteo's ``weather_code``.
WMO_CODES: dict[int, str] = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "moderate drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "moderate rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snowfall",
    73: "moderate snowfall",
    75: "heavy snowfall",
    77: "snow grains",
    80: "slight rain showers",
    81: "moderate rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}


def describe_wmo(code: float | None) -> str | None:
    """Words for a WMO weather code; None when the service sent no code."""
    if code is None:
        return None
    return WMO_CODES.get(int(code), f"unknown conditions (WMO code {int(code)})")


@dataclass(frozen=True)
class Place:
    name: str
    country: str | None
    latitude: float
    longitude: float
    timezone: str | None = None


@dataclass(frozen=True)
class CurrentWeather:
    time: str | None
    temperature: float | None
    feels_like: float | None
    humidity: float | None
    precipitation: float | None
    wind_speed: float | None
    weather_code: int | None


@dataclass(frozen=True)
class DailyWeather:
    date: str
    weather_code: int | None
    max: float | None
    min: float | None
    precipitation: float | None
    precipitation_probability: float | None


@dataclass(frozen=True)
class Forecast:
    current: CurrentWeather | None
    daily: tuple[DailyWeather, ...]
    units: dict[str, str] = field(default_factory=dict)  # temperature, humidity, precipitation, wind_speed


class WeatherProvider(Protocol):
    def geocode(self, name: str) -> Place | None: ...

    def forecast(self, place: Place, days: int) -> Forecast: ...


# --- Open-Meteo --------------------------------------------------------------------------------

CURRENT = "temperature_2m,apparent_temperature,relative_humidity_2m,precipitation,weather_code,wind_speed_10m"
DAILY = "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum,precipitation_probability_max"


_UNIT_KEYS = {  # a unit of the result: the response keys that carry it, current first
    "temperature": ("temperature_2m", "temperature_2m_max"),
    "humidity": ("relative_humidity_2m",),
    "precipitation": ("precipitation", "precipitation_sum"),
    "wind_speed": ("wind_speed_10m",),
}


def _column(daily: dict[str, Any], key: str, i: int) -> Any:
    values = daily.get(key) or []
    return values[i] if i < len(values) else None


def parse_forecast(data: dict[str, Any]) -> Forecast:
    """A Forecast from Open-Meteo's ``/v1/forecast`` JSON (``current`` + column-wise ``daily``)."""
    cur, cur_units = data.get("current") or {}, data.get("current_units") or {}
    current = CurrentWeather(
        cur.get("time"), cur.get("temperature_2m"), cur.get("apparent_temperature"),
        cur.get("relative_humidity_2m"), cur.get("precipitation"), cur.get("wind_speed_10m"),
        cur.get("weather_code"),
    ) if cur else None
    daily = data.get("daily") or {}
    days = tuple(
        DailyWeather(date, _column(daily, "weather_code", i), _column(daily, "temperature_2m_max", i),
                     _column(daily, "temperature_2m_min", i), _column(daily, "precipitation_sum", i),
                     _column(daily, "precipitation_probability_max", i))
        for i, date in enumerate(daily.get("time") or [])
    )
    units_of = {**(data.get("daily_units") or {}), **cur_units}
    units = {}
    for name, keys in _UNIT_KEYS.items():
        found = next((units_of[k] for k in keys if k in units_of), None)
        if found is not None:
            units[name] = found
    return Forecast(current, days, units)


class OpenMeteoWeather:
    """Open-Meteo's forecast and geocoding APIs (https://open-meteo.com/en/docs)."""

    def __init__(self, base_url: str, geocoding_url: str, temperature_unit: str = "celsius",
                 timeout_secs: float = 10):
        self.base_url = base_url.rstrip("/")
        self.geocoding_url = geocoding_url.rstrip("/")
        self.temperature_unit = temperature_unit
        self.http = ServiceClient("the weather service (Open-Meteo)", timeout_secs)

    def geocode(self, name: str) -> Place | None:
        data = self.http.get_json(f"{self.geocoding_url}/v1/search",
                                  {"name": name, "count": 1, "language": "en", "format": "json"})
        results = data.get("results") if isinstance(data, dict) else None
        if not results:
            return None
        try:
            top = results[0]
            return Place(top["name"], top.get("country"), float(top["latitude"]), float(top["longitude"]),
                         top.get("timezone"))
        except (KeyError, TypeError, ValueError):
            raise ToolError("the weather service (Open-Meteo) sent a place without a name or coordinates") from None

    def forecast(self, place: Place, days: int) -> Forecast:
        data = self.http.get_json(f"{self.base_url}/v1/forecast", {
            "latitude": place.latitude, "longitude": place.longitude, "current": CURRENT, "daily": DAILY,
            "timezone": "auto", "forecast_days": days, "temperature_unit": self.temperature_unit,
        })
        try:
            return parse_forecast(data)
        except (AttributeError, TypeError, ValueError):
            raise ToolError("the weather service (Open-Meteo) sent a forecast in an unexpected shape") from None

    def close(self) -> None:
        self.http.close()


BACKENDS: dict[str, Callable[..., WeatherProvider]] = {
    "open-meteo": lambda s: OpenMeteoWeather(s.base_url, s.geocoding_url, s.temperature_unit, s.timeout_secs),
}


# --- the tool ----------------------------------------------------------------------------------


def _current(c: CurrentWeather, units: dict[str, str]) -> dict[str, Any]:
    return {"time": c.time, "temperature": c.temperature, "feels_like": c.feels_like, "humidity": c.humidity,
            "precipitation": c.precipitation, "wind_speed": c.wind_speed,
            "conditions": describe_wmo(c.weather_code), "units": units}


def _day(d: DailyWeather) -> dict[str, Any]:
    return {"date": d.date, "conditions": describe_wmo(d.weather_code), "max": d.max, "min": d.min,
            "precipitation": d.precipitation, "precipitation_probability": d.precipitation_probability}


@tool("weather", icon="🌦")
def get_weather(
    ctx: ToolContext,
    location: Annotated[str, Field(min_length=1, max_length=200, description="A place name, e.g. 'Berlin'.")],
    days: Annotated[int, Field(ge=1, le=7, description="Days of forecast, 1 (today) to 7.")] = 1,
) -> dict:
    """Current weather and the daily forecast for a place."""
    provider: WeatherProvider = ctx.backend("weather")
    name = location.strip()
    if not name:
        raise ToolError("location must name a place")
    place = provider.geocode(name)
    if place is None:
        raise ToolError(f"no place called {name!r} was found")
    forecast = provider.forecast(place, days)
    return {
        "location": {"name": place.name, "country": place.country},
        "current": _current(forecast.current, forecast.units) if forecast.current else None,
        "daily": [_day(d) for d in forecast.daily[:days]],
    }


WEATHER_TOOLS = (get_weather,)


def _create(deps: CapabilityDeps) -> WeatherProvider:
    section = deps.settings.weather
    return pick_backend("weather", BACKENDS, section.backend)(section)


CAPABILITY = Capability(
    "weather", WEATHER_TOOLS, configured=lambda settings: settings.weather.enabled, create=_create,
    description="current weather and forecasts (Open-Meteo)",
)
