"""Word pools for the synthetic inbox generator: people, organisations, places, topics.

Everything here is plain data. The organisations, venues, shops and services are invented
(any resemblance to a real company is accidental); cities and personal mail domains are real
because invented ones read as fake. Changing any pool changes every generated inbox, so bump
``generator.GENERATOR_VERSION`` when you edit this file.
"""

from __future__ import annotations

FIRST_NAMES: tuple[str, ...] = (
    "Aaliyah", "Abel", "Ada", "Adrian", "Aiko", "Alejandro", "Amara", "Amir", "Ana", "Anders",
    "Anika", "Arjun", "Astrid", "Beatriz", "Benjamin", "Bianca", "Bilal", "Camille", "Carlos",
    "Chen", "Chiara", "Chloe", "Daniel", "Daria", "David", "Deepa", "Diego", "Dmitri", "Elena",
    "Elif", "Eliza", "Emeka", "Emil", "Erin", "Esther", "Fatima", "Felix", "Fiona", "Gabriel",
    "Greta", "Hana", "Hannah", "Hiroshi", "Ibrahim", "Ines", "Ingrid", "Isaac", "Ivan", "Jamal",
    "Jana", "Javier", "Jonas", "Jorge", "Julia", "Kai", "Karim", "Katarzyna", "Kenji", "Kofi",
    "Lars", "Laura", "Leila", "Leon", "Lucia", "Luis", "Magnus", "Maja", "Malik", "Marco", "Maria",
    "Marta", "Mateo", "Maya", "Mei", "Mohammed", "Nadia", "Naomi", "Nathan", "Nikhil", "Nina",
    "Noah", "Oliver", "Olga", "Omar", "Oskar", "Paolo", "Pedro", "Priya", "Rafael", "Rahul",
    "Rania", "Rebecca", "Ricardo", "Rosa", "Ruth", "Samuel", "Sara", "Selin", "Sofia", "Stefan",
    "Sunita", "Tariq", "Teresa", "Thabo", "Thomas", "Tomas", "Valentina", "Victor", "Wei", "Yara",
    "Yusuf", "Zainab", "Zofia", "Grace", "Hugo", "Iris", "Joel", "Lena", "Owen",
)  # fmt: skip

LAST_NAMES: tuple[str, ...] = (
    "Abbott", "Adeyemi", "Alvarez", "Andersen", "Bakker", "Banerjee", "Barros", "Becker",
    "Bergstrom", "Bianchi", "Brennan", "Castillo", "Chandra", "Chowdhury", "Costa", "Dahl",
    "Delgado", "Dubois", "Eriksen", "Esposito", "Farouk", "Fernandes", "Fischer", "Fontaine",
    "Galloway", "Garcia", "Gomez", "Gupta", "Haddad", "Halloran", "Hartmann", "Hayashi", "Herrera",
    "Holm", "Ibarra", "Iyer", "Jansen", "Jovanovic", "Kaur", "Kowalski", "Kruger", "Lachance",
    "Larsen", "Lindqvist", "Lopez", "Lundgren", "Mahmoud", "Marchetti", "Mendes", "Meyer",
    "Molina", "Moreau", "Mwangi", "Nakamura", "Navarro", "Nguyen", "Novak", "Nowak", "Obi",
    "Okafor", "Olsen", "Ortega", "Osei", "Park", "Patel", "Pereira", "Petrov", "Quinn", "Rahman",
    "Ramos", "Reddy", "Reyes", "Richter", "Rossi", "Russo", "Saito", "Santos", "Schmidt",
    "Serrano", "Shah", "Silva", "Sokolov", "Sorensen", "Suzuki", "Takahashi", "Tanaka", "Torres",
    "Tran", "Varga", "Vasquez", "Vogel", "Wagner", "Walsh", "Weber", "Wong", "Yamamoto", "Yilmaz",
    "Zhang", "Zimmermann", "Moretti", "Ferreira", "Lindberg", "Kim",
)  # fmt: skip

# (name, domain, what they do). Invented.
COMPANIES: tuple[tuple[str, str, str], ...] = (
    ("Bluefjord Analytics", "bluefjord.io", "data analytics"),
    ("Corvid Systems", "corvidsystems.com", "industrial software"),
    ("Halvorsen Freight", "halvorsenfreight.com", "logistics"),
    ("Lumen & Vale", "lumenvale.com", "design consultancy"),
    ("Northgate Biotech", "northgatebio.com", "biotech"),
    ("Pellucid Health", "pellucidhealth.com", "health software"),
    ("Quarry Lane Capital", "quarrylane.com", "investment"),
    ("Redwater Energy", "redwaterenergy.com", "renewable energy"),
    ("Saltmarsh Media", "saltmarshmedia.com", "publishing"),
    ("Tessellate Robotics", "tessellate.ai", "robotics"),
    ("Umber Foods", "umberfoods.com", "food distribution"),
    ("Verdant Labs", "verdantlabs.io", "agritech"),
    ("Wexford Insurance", "wexfordins.com", "insurance"),
    ("Ardent Legal", "ardentlegal.com", "law firm"),
    ("Brightwell Partners", "brightwellpartners.com", "management consulting"),
    ("Cindervale Games", "cindervale.com", "game studio"),
    ("Driftwood Hospitality", "driftwoodhospitality.com", "hotels"),
    ("Embercore Security", "embercore.io", "cybersecurity"),
    ("Foxglove Pharma", "foxglovepharma.com", "pharmaceuticals"),
    ("Granite Peak Construction", "granitepeak.build", "construction"),
    ("Helix Payments", "helixpay.com", "payments"),
    ("Ironbark Manufacturing", "ironbarkmfg.com", "manufacturing"),
    ("Juniper Street Realty", "juniperstreet.com", "real estate"),
    ("Kestrel Aviation", "kestrelaviation.com", "aviation services"),
    ("Larkspur Education", "larkspur.edu", "online education"),
    ("Meridian Telecom", "meridiantel.com", "telecom"),
    ("Nimbus Cloudworks", "nimbuscloud.io", "cloud hosting"),
    ("Oakhollow Printing", "oakhollowprint.com", "printing"),
    ("Pinecrest Staffing", "pinecreststaffing.com", "recruiting"),
    ("Quillon Translation", "quillon.com", "translation"),
    ("Riverbend Catering", "riverbendcatering.com", "catering"),
    ("Sablewood Furniture", "sablewood.com", "office furniture"),
    ("Tidewater Cleaning", "tidewaterclean.com", "facility services"),
    ("Upland Payroll", "uplandpayroll.com", "payroll"),
    ("Vantage Audit Group", "vantageaudit.com", "audit"),
    ("Wildrose Events", "wildroseevents.com", "event planning"),
    ("Yellowpine Software", "yellowpine.dev", "software"),
    ("Zephyr Mobility", "zephyrmobility.com", "mobility"),
)

# Companies that invoice for services: name -> ((service, low, high monthly dollars), ...).
VENDORS: dict[str, tuple[tuple[str, int, int], ...]] = {
    "Halvorsen Freight": (("freight forwarding", 2200, 9800), ("warehouse storage", 900, 5200)),
    "Nimbus Cloudworks": (("cloud hosting", 1800, 14500), ("managed backups", 400, 2600)),
    "Ardent Legal": (("legal review", 3000, 18000), ("contract drafting", 1500, 9000)),
    "Riverbend Catering": (("event catering", 700, 6200), ("office lunches", 500, 3100)),
    "Quillon Translation": (("translation services", 400, 3900), ("interpreting", 600, 4200)),
    "Upland Payroll": (("payroll processing", 600, 2800), ("benefits administration", 500, 2300)),
    "Embercore Security": (
        ("security monitoring", 1100, 5600),
        ("penetration testing", 4000, 16000),
    ),
    "Pinecrest Staffing": (("recruiting fees", 4000, 21000), ("temporary staffing", 2500, 11000)),
    "Oakhollow Printing": (("printing", 300, 2400), ("signage", 250, 1900)),
    "Tidewater Cleaning": (("office cleaning", 900, 3400), ("window cleaning", 200, 1200)),
    "Sablewood Furniture": (("equipment leasing", 1500, 7400), ("furniture rental", 700, 3600)),
    "Vantage Audit Group": (("audit fees", 5000, 24000), ("tax advisory", 1800, 8800)),
    "Wildrose Events": (("event planning", 1200, 9500), ("venue hire", 900, 7000)),
    "Yellowpine Software": (("IT support", 1300, 6900), ("software licences", 800, 9000)),
    "Bluefjord Analytics": (("data labelling", 2100, 12800), ("analytics consulting", 3000, 15000)),
}

PROJECTS: tuple[str, ...] = (
    "Atlas", "Borealis", "Cobalt", "Driftwood", "Ember", "Falcon", "Granite", "Harbor", "Indigo",
    "Juniper", "Kestrel", "Lantern", "Mosaic", "Nimbus", "Orchid", "Polaris", "Quartz",
    "Riverstone", "Sequoia", "Tundra", "Umbra", "Vesper", "Willow", "Zenith", "Aurora", "Beacon",
    "Cascade", "Delta", "Evergreen", "Fjord",
)  # fmt: skip

DELIVERABLES: tuple[str, ...] = (
    "final budget", "test plan", "launch checklist", "risk register", "design spec",
    "migration plan", "vendor shortlist", "training deck", "security assessment",
    "data retention policy", "pilot report", "rollout schedule",
)  # fmt: skip

EXTERNAL_MEETINGS: tuple[str, ...] = (
    "quarterly business review", "contract renewal call", "pricing workshop",
    "security audit kickoff", "integration review", "partnership planning session",
    "escalation call", "product demo", "onboarding workshop", "roadmap briefing",
)  # fmt: skip

INTERNAL_MEETINGS: tuple[str, ...] = (
    "weekly team sync", "sprint planning", "1:1", "design critique", "ops standup", "retro",
    "leadership sync", "hiring committee", "brown-bag lunch", "town hall prep",
)  # fmt: skip

TEAMS: tuple[str, ...] = (
    "Platform", "Data", "Design", "Finance", "Marketing", "Sales", "Operations", "Research",
    "Customer Success", "Security", "Product", "Legal",
)  # fmt: skip

TOPICS: tuple[str, ...] = (
    "hiring", "customer churn", "security", "product roadmap", "Q2 revenue", "infrastructure",
    "partnerships", "brand refresh", "pricing", "compliance", "support backlog", "analytics",
)  # fmt: skip

ROLES: tuple[str, ...] = (
    "Senior Data Engineer", "Product Designer", "Account Executive", "Financial Analyst",
    "Site Reliability Engineer", "Marketing Manager", "QA Lead", "Technical Writer",
    "Customer Success Manager", "Backend Engineer",
)  # fmt: skip

CITIES: tuple[str, ...] = (
    "Lisbon", "Rotterdam", "Copenhagen", "Montreal", "Austin", "Denver", "Edinburgh", "Vienna",
    "Krakow", "Seoul", "Singapore", "Nairobi", "Melbourne", "Toronto", "Barcelona", "Dublin",
    "Helsinki", "Porto", "Boston", "Chicago", "Seattle", "Prague", "Zurich", "Osaka", "Bogota",
    "Cape Town", "Tallinn", "Valencia", "Lyon", "Munich",
)  # fmt: skip

HOME_CITIES: tuple[str, ...] = (
    "London", "Berlin", "Amsterdam", "New York", "San Francisco", "Stockholm", "Paris", "Oslo",
    "Madrid", "Milan",
)  # fmt: skip

# Venue name pieces (venue = prefix + kind).
VENUE_PREFIXES: tuple[str, ...] = (
    "Larkspur", "Old Mill", "Harbourside", "Copperleaf", "Stonebridge", "Marigold", "Ashgrove",
    "Bellwether", "Kingfisher", "Saltworks", "Foundry", "Whitethorn", "Glasshouse", "Bramble",
    "Cedar Hill", "Lighthouse", "Orchard", "Silverbirch", "Riverside", "Tannery",
)  # fmt: skip
VENUE_KINDS: tuple[str, ...] = (
    "Hotel", "Conference Centre", "Lodge", "Loft", "Estate", "Boathouse", "Works", "Pavilion",
)  # fmt: skip

RESTAURANTS: tuple[str, ...] = (
    "Osteria Lume", "The Copper Pot", "Sakura Tei", "Casa Brava", "Little Saigon Kitchen",
    "The Gilded Fig", "Bistro Margaux", "Tandoor House", "Marisco", "The Hungry Heron",
    "Noodle Bar Shiro", "Taverna Eleni", "Smoke & Ember", "Le Petit Jardin", "Verde Cantina",
    "Blue Door Bistro", "Oyster Row", "Mezze Garden", "The Olive Press", "Dumpling Lab",
    "Fika Kaffebar", "Pho Saigon", "Trattoria Nonna", "The Salt Cellar", "Kimchi Republic",
)  # fmt: skip

OCCASIONS: tuple[str, ...] = (
    "Maya's birthday", "our anniversary", "the book club", "Dad's retirement", "the team farewell",
    "New Year's Eve", "the reunion dinner", "Sunday brunch", "the housewarming", "Leo's graduation",
)  # fmt: skip

HOME_JOBS: tuple[str, ...] = (
    "kitchen repainting", "bathroom retiling", "garden fence repair", "roof gutter cleaning",
    "boiler service", "window replacement", "deck staining", "attic insulation",
    "driveway resurfacing", "hallway flooring",
)  # fmt: skip

SHOPS: tuple[str, ...] = (
    "Fernwood Outdoors", "Pagecraft Books", "Kettle & Crumb", "Volt Electronics",
    "Thimble Fabrics", "Canopy Home", "Trailhead Sports", "Inkwell Stationery",
    "Little Sprout Toys", "Bloom Garden Supply", "Nomad Luggage", "Crisp Kitchenware",
)  # fmt: skip

PICKUP_POINTS: tuple[str, ...] = (
    "the parcel locker at Central Station", "the Post Office on Mill Street",
    "the corner shop at 14 Harbour Road", "the pickup desk in Westfield Mall",
    "the locker bank at Elm Park", "the depot on Canal Street", "the newsagent at 2 Station Square",
    "the pharmacy on King Street", "the library pickup point", "the locker at Riverside Gym",
)  # fmt: skip

MERCHANTS: tuple[str, ...] = (
    "Greenleaf Grocers", "CityRide Taxi", "Brewline Coffee", "Harbor Pharmacy", "Metro Fuel",
    "Corner Books", "Lantern Cinema", "FreshMarket", "Northside Bakery", "Parkway Parking",
)  # fmt: skip

AIRLINES: tuple[tuple[str, str, str], ...] = (
    ("Skylark Air", "skylarkair.com", "SK"),
    ("Aurora Airways", "auroraairways.com", "AU"),
    ("Meridian Wings", "meridianwings.com", "MW"),
)

HOTEL_SITES: tuple[tuple[str, str], ...] = (
    ("StayPoint", "staypoint.travel"),
    ("RoomHarbor", "roomharbor.com"),
)

COURIERS: tuple[tuple[str, str], ...] = (
    ("ParcelPath", "parcelpath.com"),
    ("SwiftDrop Couriers", "swiftdrop.com"),
)

NEWSLETTERS: tuple[tuple[str, str, str], ...] = (
    # (title, sender address, theme)
    ("The Ledger Weekly", "newsletter@theledgerweekly.com", "finance"),
    ("Ops Digest", "digest@opsdigest.io", "operations"),
    ("Product Notes", "hello@productnotes.co", "product"),
    ("The Data Brief", "brief@thedatabrief.com", "data"),
    ("Remote Work Review", "editors@remotereview.net", "work"),
    ("Design Signals", "team@designsignals.io", "design"),
    ("Founders Morning", "morning@foundersmorning.com", "startups"),
    ("Security Sunday", "news@securitysunday.org", "security"),
    ("City Eats", "newsletter@cityeats.guide", "food"),
    ("Trail & Tide", "updates@trailandtide.com", "outdoors"),
)

HEADLINE_TEMPLATES: tuple[str, ...] = (
    "{company} raises new funding to expand its {sector} business",
    "Five lessons from a decade of {practice}", "Why {sector} teams are rethinking {practice}",
    "The quiet comeback of {practice}", "{city} becomes the latest hub for {sector} startups",
    "A field guide to {practice} for small teams", "What we learned shipping {practice} at scale",
    "Regulators in {city} take a closer look at {sector}",
    "Interview: running {practice} at {company}", "Three charts that explain {sector} this quarter",
)  # fmt: skip

PRACTICES: tuple[str, ...] = (
    "remote onboarding", "incident reviews", "pricing experiments", "vendor management",
    "data contracts", "quarterly planning", "design systems", "customer interviews",
    "cost forecasting", "zero-trust networking", "async standups", "okr setting",
)  # fmt: skip

REPOS: tuple[str, ...] = (
    "billing-service", "web-app", "data-pipeline", "infra", "mobile-client", "auth", "reporting",
    "search-api", "design-tokens", "etl-jobs",
)  # fmt: skip

PR_TITLES: tuple[str, ...] = (
    "Fix flaky integration test", "Bump dependencies", "Add retry to webhook sender",
    "Refactor invoice export", "Improve error messages on login", "Cache search results",
    "Add metrics for queue depth", "Remove deprecated endpoint", "Speed up nightly build",
    "Handle empty CSV uploads", "Update onboarding copy", "Paginate audit log",
)  # fmt: skip

DOCS: tuple[str, ...] = (
    "statement of work", "master services agreement", "data processing addendum", "Q3 forecast",
    "board deck", "hiring plan", "pricing proposal", "incident postmortem", "onboarding guide",
    "quarterly report", "architecture overview", "project charter",
)  # fmt: skip

PERSONAL_DOMAINS: tuple[str, ...] = (
    "gmail.com", "outlook.com", "yahoo.com", "proton.me", "icloud.com", "fastmail.com",
)  # fmt: skip

SMALL_BUSINESS_SUFFIXES: tuple[str, ...] = (
    "Home Repairs", "Renovations", "Handyman Services", "Building & Decor", "Property Care",
)  # fmt: skip

PROMO_SENDERS: tuple[tuple[str, str], ...] = (
    ("Fernwood Outdoors", "offers@fernwoodoutdoors.com"),
    ("Pagecraft Books", "deals@pagecraft.com"),
    ("Volt Electronics", "promo@voltelectronics.com"),
    ("Canopy Home", "hello@canopyhome.com"),
    ("Nomad Luggage", "news@nomadluggage.com"),
    ("Kettle & Crumb", "treats@kettleandcrumb.com"),
)
