"""The demo's corpus: short documents the project wrote itself (no third-party text), each with
invented facts that no model can know, and a question per fact with its expected answer."""

from __future__ import annotations

DOCUMENTS: dict[str, str] = {
    "harbor-station.txt": (
        "The Harbor Station Research Log\n\n"
        "Harbor Station sits on a rocky spit at the northern end of Kellan Bay. It was built in the "
        "spring of 1987 by a small team of marine biologists who wanted a place to watch the seasonal "
        "migration of grey seals without the noise of the mainland ports. The station has three "
        "buildings: a dormitory for eight people, a workshop where boats and instruments are repaired, "
        "and a laboratory with two saltwater tanks.\n\n"
        "The first director of the station was Dr. Ilse Vantongeren, who ran it for eleven years. Under "
        "her direction the team counted seals every morning at dawn and recorded the water temperature "
        "at four depths. The station's supply boat is called the Marigold, and it crosses from the "
        "village of Portheven every Tuesday and Friday, weather permitting.\n\n"
        "In winter the station is closed, and only a caretaker remains. The caretaker keeps the generators "
        "running, clears ice from the landing, and radios the mainland twice a day. Visitors who wish to "
        "see the seals are asked to come in late September, when the pups are born on the sheltered "
        "beaches below the lighthouse."
    ),
    "orchard-cooperative.txt": (
        "Minutes of the Lindqvist Orchard Cooperative\n\n"
        "The cooperative met in the packing shed on the first Monday of the month. Twenty-three members "
        "were present. The chair opened the meeting by thanking everyone who had helped with the harvest, "
        "which was the largest in the cooperative's history: 412 tonnes of apples and 57 tonnes of pears.\n\n"
        "The treasurer reported that the new cold store had been paid for in full. The members agreed to "
        "name the most successful apple variety of the year, a late-ripening red apple with a sharp taste, "
        "the Copper Wren. It will be sold at the autumn market in Elstrand under that name.\n\n"
        "Several members raised the problem of frost in the lower fields. After a long discussion the "
        "cooperative voted to buy two wind machines, to be installed before the spring blossom. The next "
        "meeting will be held on the first Monday of the following month, and the secretary will send "
        "the agenda a week before."
    ),
    "robot-club.txt": (
        "Notes from the Westbridge School Robot Club\n\n"
        "The robot club meets after classes on Wednesdays in room 14. This year the club built a small "
        "rover that can follow a line on the floor and stop in front of obstacles. The rover has four "
        "wheels, two motors, a light sensor and an ultrasonic distance sensor. The students named the "
        "rover Pebble because of its grey, rounded shell.\n\n"
        "At the regional competition the team finished in third place out of nineteen schools. The judges "
        "praised the clean wiring and the clear notebook in which the team had written down every test. "
        "The club's teacher, Mr. Okonkwo-Hale, said that the secret of the team was patience: they tested "
        "the rover more than two hundred times before the competition.\n\n"
        "Next year the club plans to build a robot arm that can sort coloured blocks. New members are "
        "welcome, and no experience is needed."
    ),
}

# (document, question, expected answer substring)
QUESTIONS: list[tuple[str, str, str]] = [
    ("harbor-station.txt", "What is the name of the station's supply boat?", "Marigold"),
    ("harbor-station.txt", "Who was the first director of Harbor Station?", "Vantongeren"),
    ("orchard-cooperative.txt", "What name was given to the most successful apple variety?", "Copper Wren"),
    ("robot-club.txt", "What did the students name their rover?", "Pebble"),
]
