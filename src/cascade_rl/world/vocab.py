"""Word lists and the tiny knowledge base the toy world's generators draw from (issue 4).

Everything here is plain data: topics with a few facts each (general chat, instruction
following, reward-model pairs), people, items and places (math word problems, tool calls),
and identifier parts (SWE repositories). Kept small on purpose: a model of a few million
parameters trained for minutes has to be able to learn this world.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """A subject of general chat: a name (plural or mass noun), its category, two adjectives,
    three short facts, one reason people like it and one tip."""

    name: str
    category: str
    adjectives: tuple[str, str]
    facts: tuple[str, str, str]
    reason: str
    tip: str


def _topic(name: str, category: str, adjectives: str, facts: str, reason: str, tip: str) -> Topic:
    adjective_pair = tuple(adjectives.split())
    fact_triple = tuple(f.strip() + "." for f in facts.split(".") if f.strip())
    assert len(adjective_pair) == 2 and len(fact_triple) == 3, name
    return Topic(name, category, adjective_pair, fact_triple, reason, tip)  # type: ignore[arg-type]


TOPICS: tuple[Topic, ...] = (
    # animals
    _topic("cats", "animal", "curious quiet",
           "Cats sleep for most of the day. Cats clean their fur with their tongues. "
           "A cat can see well in dim light", "they are calm and playful", "give them a warm place to sleep"),
    _topic("dogs", "animal", "loyal friendly",
           "Dogs have a very strong sense of smell. Dogs learn simple commands quickly. "
           "Many dogs love long walks", "they are loyal friends", "walk them every day"),
    _topic("owls", "animal", "wise silent",
           "Owls hunt at night. Owls can turn their heads very far. "
           "Their soft feathers make their flight silent", "they look wise and mysterious", "listen for them after dark"),
    _topic("foxes", "animal", "clever shy",
           "Foxes live in forests and even in towns. Foxes use their tails to keep warm. "
           "A fox can hear small animals under snow", "they are clever and quick", "watch them from far away"),
    _topic("whales", "animal", "huge gentle",
           "Whales are mammals that live in the sea. Whales breathe air through a blowhole. "
           "Some whales sing long songs", "they are huge and gentle", "join a boat tour with a guide"),
    _topic("bees", "animal", "busy useful",
           "Bees make honey from flower nectar. Bees help plants grow fruit. "
           "A bee dances to show where food is", "they help our gardens", "plant flowers that bees visit"),
    _topic("horses", "animal", "strong graceful",
           "Horses can sleep while standing. Horses eat grass and hay. "
           "A horse can run very fast", "they are strong and graceful", "learn to ride with a teacher"),
    _topic("frogs", "animal", "green noisy",
           "Frogs start life as tadpoles. Frogs drink water through their skin. "
           "Many frogs sing at night", "they are funny and noisy", "look for them near ponds"),
    _topic("penguins", "animal", "funny brave",
           "Penguins cannot fly but they swim well. Penguins live in cold places. "
           "A penguin father keeps the egg warm", "they walk in a funny way", "visit them at a zoo"),
    _topic("turtles", "animal", "slow patient",
           "Turtles carry their homes on their backs. Some turtles live for a very long time. "
           "Sea turtles swim across whole oceans", "they are calm and patient", "keep their water clean"),
    # places
    _topic("rivers", "place", "calm long",
           "Rivers carry water to the sea. Many towns grow beside rivers. "
           "Fish swim in clean rivers", "they are calm and full of life", "walk along the bank in spring"),
    _topic("mountains", "place", "tall cold",
           "Mountains have snow on their tops. The air is thin high up. "
           "Many rivers start in the mountains", "the views are wide and clear", "bring warm clothes and water"),
    _topic("deserts", "place", "dry hot",
           "Deserts get very little rain. Nights in the desert can be cold. "
           "Cactus plants store water inside", "they are quiet and open", "carry plenty of water"),
    _topic("forests", "place", "green shady",
           "Forests are full of tall trees. Many animals make their homes in forests. "
           "Trees in forests clean the air", "they are shady and peaceful", "stay on the marked paths"),
    _topic("islands", "place", "small sunny",
           "Islands are surrounded by water. Some islands were made by volcanoes. "
           "Boats and planes bring people to islands", "they feel far from busy life", "check the ferry times"),
    _topic("beaches", "place", "sandy bright",
           "Beaches are made of sand or small stones. Waves change the beach every day. "
           "Crabs hide under wet sand", "the sea air is fresh", "use sun cream and a hat"),
    _topic("lakes", "place", "still deep",
           "Lakes are bodies of fresh water. Some lakes freeze in winter. "
           "Birds rest on quiet lakes", "the water is still and clear", "go early when it is quiet"),
    _topic("caves", "place", "dark cool",
           "Caves stay cool all year. Water shapes caves over many years. "
           "Bats often sleep in caves", "they feel like hidden worlds", "go with a guide and a lamp"),
    _topic("gardens", "place", "colorful fresh",
           "Gardens need sun and water. Flowers in gardens attract bees. "
           "People grow food in gardens", "they are colorful and fresh", "water the plants in the morning"),
    _topic("volcanoes", "place", "hot powerful",
           "Volcanoes can throw out hot lava. Some volcanoes sleep for many years. "
           "Volcanic soil is very rich", "they show the power of nature", "visit only with local rangers"),
    # food and drink
    _topic("apples", "food", "sweet crisp",
           "Apples grow on trees. There are thousands of kinds of apples. "
           "Apples can be red or green or yellow", "they are sweet and crisp", "keep them in a cool place"),
    _topic("bread", "food", "warm soft",
           "Bread is made from flour and water. Yeast makes bread rise. "
           "People have baked bread for thousands of years", "it is warm and filling", "let the dough rest before baking"),
    _topic("rice", "food", "simple filling",
           "Rice grows in wet fields. Rice feeds billions of people. "
           "There are long and short kinds of rice", "it goes with many dishes", "rinse it before cooking"),
    _topic("soup", "food", "hot tasty",
           "Soup is made by cooking food in water. Soup can be thick or thin. "
           "Many people eat soup when they feel cold", "it is warm and comforting", "add salt at the end"),
    _topic("cheese", "food", "rich salty",
           "Cheese is made from milk. Some cheese ages for years. "
           "There are hundreds of kinds of cheese", "it is rich and tasty", "keep it wrapped in paper"),
    _topic("honey", "food", "golden sweet",
           "Honey is made by bees. Honey never really goes bad. "
           "Honey can taste of the flowers it came from", "it is sweet and natural", "store it at room temperature"),
    _topic("tea", "food", "hot soothing",
           "Tea is made from the leaves of a plant. Green and black tea come from the same plant. "
           "People drink tea all over the world", "it is warm and soothing", "do not boil green tea leaves"),
    _topic("pasta", "food", "quick tasty",
           "Pasta is made from wheat and water. Pasta comes in many shapes. "
           "Pasta cooks in boiling water", "it is quick and tasty", "salt the water well"),
    _topic("oranges", "food", "juicy bright",
           "Oranges grow on trees in warm places. Oranges are full of vitamin C. "
           "Orange peel has a strong smell", "they are juicy and bright", "pick heavy ones"),
    _topic("carrots", "food", "crunchy orange",
           "Carrots grow under the ground. Carrots can be orange or purple. "
           "Rabbits like to eat carrots", "they are crunchy and sweet", "store them in a cold place"),
    # activities
    _topic("running", "activity", "healthy simple",
           "Running makes the heart strong. Running needs only good shoes. "
           "Many cities hold running races", "it clears the mind", "start slowly and rest often"),
    _topic("reading", "activity", "quiet relaxing",
           "Reading builds a rich vocabulary. Reading can take you to other worlds. "
           "Libraries lend books for free", "it is relaxing and fun", "read a little every night"),
    _topic("cooking", "activity", "creative useful",
           "Cooking turns simple food into meals. Cooking at home saves money. "
           "Recipes help new cooks learn", "it is creative and useful", "prepare everything before you start"),
    _topic("painting", "activity", "creative calm",
           "Painting lets people share ideas with color. Painters use brushes and paint. "
           "Some paintings are very old", "it is calm and creative", "mix colors on a plate first"),
    _topic("swimming", "activity", "fun healthy",
           "Swimming moves the whole body. Swimming is a useful skill. "
           "Many people swim in pools or lakes", "it is fun and healthy", "always swim where it is safe"),
    _topic("chess", "activity", "clever old",
           "Chess is played on a board of sixty four squares. Each player starts with sixteen pieces. "
           "Chess is very old", "it trains the mind", "study simple openings first"),
    _topic("gardening", "activity", "patient rewarding",
           "Gardening means caring for plants. Gardening keeps people active. "
           "Gardeners watch the weather closely", "it is rewarding and calm", "start with easy plants"),
    _topic("hiking", "activity", "active scenic",
           "Hiking means walking on trails in nature. Hiking can last a few hours or many days. "
           "Hikers carry water and food", "it is active and scenic", "wear good boots"),
    _topic("singing", "activity", "joyful free",
           "Singing uses the voice as an instrument. Singing in a group feels joyful. "
           "Practice makes the voice stronger", "it is joyful and free", "warm up your voice first"),
    _topic("dancing", "activity", "lively social",
           "Dancing moves the body to music. Every culture has its own dances. "
           "Dancing is good exercise", "it is lively and social", "learn the basic steps slowly"),
    # objects
    _topic("bicycles", "object", "fast light",
           "Bicycles have two wheels. Bicycles need no fuel. "
           "Riding a bicycle is good exercise", "they are fast and clean", "check the tires before a ride"),
    _topic("clocks", "object", "useful precise",
           "Clocks show the time. Old clocks used springs and gears. "
           "Some clocks ring every hour", "they keep our days in order", "set them right twice a year"),
    _topic("books", "object", "old useful",
           "Books hold stories and ideas. Books were once copied by hand. "
           "A book can last for hundreds of years", "they open new worlds", "keep them away from water"),
    _topic("lamps", "object", "bright warm",
           "Lamps give light in the dark. Old lamps burned oil. "
           "Modern lamps use very little power", "they make rooms cozy", "choose a warm light for the evening"),
    _topic("boats", "object", "steady old",
           "Boats float on water. Some boats use sails and others use engines. "
           "People have built boats for thousands of years", "they take us across the water", "always wear a life jacket"),
    _topic("trains", "object", "long steady",
           "Trains run on rails. Trains can carry many people at once. "
           "Some trains are very fast", "they are steady and comfortable", "book seats early"),
    _topic("kites", "object", "light colorful",
           "Kites fly on the wind. Kites are made of light paper or cloth. "
           "People fly kites at festivals", "they are colorful and fun", "fly them in an open field"),
    _topic("maps", "object", "detailed helpful",
           "Maps show places from above. Old maps were drawn by hand. "
           "Maps use symbols for roads and rivers", "they help us find our way", "learn the map legend first"),
    _topic("pianos", "object", "grand musical",
           "Pianos have black and white keys. A piano has many strings inside. "
           "Pianos can play soft and loud notes", "they can play any kind of music", "practice a little each day"),
    _topic("umbrellas", "object", "handy simple",
           "Umbrellas keep people dry in the rain. Umbrellas also give shade from the sun. "
           "Many umbrellas fold up small", "they are simple and handy", "dry them open after use"),
    # nature and weather
    _topic("rain", "nature", "fresh gentle",
           "Rain falls from clouds. Rain fills rivers and lakes. "
           "Plants need rain to grow", "it smells fresh", "carry an umbrella in spring"),
    _topic("snow", "nature", "white soft",
           "Snow is made of tiny ice crystals. No two snowflakes look the same. "
           "Snow covers the ground in winter", "it makes the world quiet and white", "wear warm gloves"),
    _topic("clouds", "nature", "soft changing",
           "Clouds are made of tiny drops of water. Clouds can bring rain or snow. "
           "Clouds change shape with the wind", "they make the sky interesting", "watch them on a windy day"),
    _topic("stars", "nature", "distant bright",
           "Stars are huge balls of hot gas. The sun is a star. "
           "Stars look small because they are far away", "they fill the night sky", "look for them far from city lights"),
    _topic("storms", "nature", "loud wild",
           "Storms bring strong wind and rain. Lightning often comes with storms. "
           "Thunder is the sound of lightning", "they show the power of the sky", "stay inside during lightning"),
    _topic("rainbows", "nature", "colorful rare",
           "Rainbows appear when sun shines through rain. A rainbow has seven colors. "
           "Rainbows are shaped like arcs", "they are colorful and rare", "look away from the sun after rain"),
    _topic("seasons", "nature", "changing regular",
           "There are four seasons in many places. Seasons change as the earth moves around the sun. "
           "Each season has its own weather", "each one brings something new", "plan trips around the weather"),
    _topic("oceans", "nature", "vast deep",
           "Oceans cover most of the earth. Oceans are full of salt water. "
           "The deep ocean is dark and cold", "they are vast and full of life", "learn about tides before a swim"),
    _topic("trees", "nature", "tall old",
           "Trees make oxygen for us to breathe. Some trees live for thousands of years. "
           "Trees grow a new ring every year", "they give shade and clean air", "water young trees often"),
    _topic("flowers", "nature", "bright fragrant",
           "Flowers help plants make seeds. Bees visit flowers for nectar. "
           "Flowers come in almost every color", "they are bright and fragrant", "cut the stems at an angle"),
)

TOPICS_BY_CATEGORY: dict[str, tuple[Topic, ...]] = {}
for _t in TOPICS:
    TOPICS_BY_CATEGORY.setdefault(_t.category, ())
    TOPICS_BY_CATEGORY[_t.category] += (_t,)

NAMES = ("Ana", "Ben", "Cleo", "Dan", "Eva", "Finn", "Gus", "Hana", "Ivan", "Jade", "Kai", "Lena",
         "Milo", "Nora", "Omar", "Pia", "Raj", "Sara", "Tom", "Uma", "Vic", "Wes", "Yara", "Zoe")
ITEMS = ("apples", "pens", "books", "coins", "stamps", "shells", "cards", "marbles", "stickers",
         "cookies", "eggs", "balloons", "pencils", "buttons", "rocks", "flowers")
CITIES = ("Paris", "Rome", "Tokyo", "Lima", "Cairo", "Oslo", "Delhi", "Quito", "Seoul", "Dublin",
          "Madrid", "Nairobi", "Lisbon", "Prague", "Sydney", "Boston", "Denver", "Vienna", "Hanoi", "Bogota")
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "INR", "CAD", "CHF", "BRL")
LANGUAGES = ("French", "Spanish", "German", "Italian", "Japanese", "Dutch")
SONGS = ("Blue Moon", "Summer Rain", "Golden Road", "Night Train", "Paper Boats", "Old River",
         "Silver Lines", "Quiet Storm", "Morning Light", "Wild Roses")

#: Names in the SWE repositories: packages, modules, functions and variables (single words).
PACKAGES = ("shop", "geo", "stats", "bank", "farm", "school", "store", "trip", "clinic", "game",
            "garden", "hotel", "library", "studio", "market", "park")
MODULES = ("pricing", "utils", "rules", "core", "helpers", "metrics", "limits", "billing", "orders",
           "reports", "convert", "checks")
FUNCTIONS = ("scale", "shift", "clamp", "limit", "total", "measure", "apply", "combine", "adjust",
             "compute", "merge", "step", "score", "weigh", "count", "spread", "reduce", "grow")
VARIABLES = ("a", "b", "x", "y", "n", "m", "total", "count", "value", "size", "rate", "price",
             "width", "height", "speed", "level", "amount", "weight")
